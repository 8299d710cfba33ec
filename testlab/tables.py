"""Reading back the CLI's text tables (`route-agent show ...`) in tests, checking their alignment.

DOC: `parse` takes the lines of one table as printed (a header row whose column names have no
blanks, then rows) and returns one dict per row, column name -> stripped cell. It fails (an
AssertionError naming the line) unless every row's cells start exactly where the header's columns
start: each cell begins at its column (no leading blank), ends at least two blanks before the
next column, and nothing spills across a column start. A first column with a blank header (`show
rib`'s `*`) starts at 0. A repeated header row (the streaming `show rib` prints one again when a
page widens a column) starts a new layout for the rows after it.
"""

from __future__ import annotations

import re


def _layout(header: str) -> tuple[list[str], list[int]]:
    words = [(m.group(), m.start()) for m in re.finditer(r"\S+", header)]
    names, starts = [w for w, _ in words], [s for _, s in words]
    if header.startswith(" "):  # a first column without a name
        names, starts = [" "] + names, [0] + starts
    return names, starts


def parse(lines: list[str]) -> list[dict[str, str]]:
    assert lines, "no table"
    names, starts = _layout(lines[0])
    rows = []
    for text in lines[1:]:
        if text.split() == lines[0].split() and _layout(text)[0] == names:
            names, starts = _layout(text)  # a repeated header: the columns may have grown
            continue
        row = {}
        for i, (name, start) in enumerate(zip(names, starts)):
            end = starts[i + 1] if i + 1 < len(starts) else len(text)
            cell = text[start:end]
            assert not cell.strip() or not cell.startswith(" "), f"column {name!r} does not start at {start}: {text!r}"
            if i + 1 < len(starts) and len(text) > end:
                assert cell.endswith("  ") or not cell.strip() and cell.endswith(" "), \
                    f"column {name!r} runs into the next one: {text!r}"
            row[name] = cell.strip()
        rows.append(row)
    return rows


def split(text: str) -> list[list[str]]:
    """The tables of a command's output: blocks of lines separated by blank lines, each block's
    first line that names columns onwards (a title line such as `show fib`'s is left out by the
    caller, who knows its views)."""
    blocks, cur = [], []
    for text_line in text.splitlines():
        if text_line.strip():
            cur.append(text_line)
        elif cur:
            blocks.append(cur)
            cur = []
    return blocks + ([cur] if cur else [])
