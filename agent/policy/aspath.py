"""AS_PATH regular expressions as router configurations write them.

DOC: ``_`` matches an AS boundary (start, end or the space between two ASNs), as in Cisco/FRR
``as-path access-list``; everything else is a Python regular expression over the AS_PATH written
as decimal ASNs separated by single spaces. Pure; used by the policy engine and by the
`RoutePolicy` schema (which rejects an invalid expression at the field).
"""

from __future__ import annotations

import re


_AS_BOUNDARY = "(?:^| |$)"


def translate_as_path_regex(text: str) -> str:
    """Replace each ``_`` outside a bracket expression (and not escaped) by an AS boundary."""
    out: list[str] = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c == "\\":
            out.append(text[i : i + 2])
            i += 2
        elif c == "[":
            j = i + 1
            if j < n and text[j] == "^":
                j += 1
            if j < n and text[j] == "]":
                j += 1  # a leading ']' is literal
            while j < n and text[j] != "]":
                j += 2 if text[j] == "\\" else 1
            out.append(text[i : j + 1])
            i = j + 1
        elif c == "_":
            out.append(_AS_BOUNDARY)
            i += 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


def compile_as_path_regex(text: str) -> re.Pattern[str]:
    """The compiled pattern of an ``asPath.regex`` (re.error if invalid)."""
    return re.compile(translate_as_path_regex(text))
