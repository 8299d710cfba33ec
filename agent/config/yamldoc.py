"""YAML text to documents: composed node trees (for line numbers) and their plain data.

DOC: `documents(text)` yields, per YAML document of the text, its number (from 1), its root node
(``start_mark`` gives the line of every key and item) and the constructed data, with PyYAML's
safe loader (libyaml's when available: 3x faster on big files, the same marks). A syntax or
construction error raises `YamlError` (line and message) after the documents before it.
`line_of(node, loc)` finds the line of a field path in a node tree; `duplicate_keys(node)` finds
the mapping keys YAML would silently overwrite.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import yaml

# libyaml's loader when PyYAML has it (3x faster on big files); node marks (line numbers) are
# the same
_YamlLoader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class YamlError(Exception):
    """The text is not YAML the loader accepts: `message` (column included), at `line` (1-based)."""

    def __init__(self, message: str, line: int | None = None):
        super().__init__(message)
        self.message = message
        self.line = line


def documents(text: str) -> Iterator[tuple[int, yaml.Node, Any]]:
    """(number, root node, data) of each document of `text`; `YamlError` where it stops being YAML."""
    loader = _YamlLoader(text)
    number = 0
    try:
        while loader.check_node():
            number += 1
            node = loader.get_node()
            yield number, node, loader.construct_document(node)
    except yaml.YAMLError as exc:
        raise _yaml_error(exc) from None
    finally:
        loader.dispose()


def line_of(node: yaml.Node, loc: Sequence[str | int]) -> int:
    """The line (1-based) of the deepest node along `loc`: a key's line for mapping entries."""
    line = node.start_mark.line + 1
    for part in loc:
        if isinstance(node, yaml.MappingNode):
            match = None
            for key, value in node.value:  # the last one wins, as in the constructed dict
                if isinstance(key, yaml.ScalarNode) and key.value == str(part):
                    match = (key, value)
            if match is None:
                break
            line = match[0].start_mark.line + 1
            node = match[1]
        elif isinstance(node, yaml.SequenceNode) and isinstance(part, int) and 0 <= part < len(node.value):
            node = node.value[part]
            line = node.start_mark.line + 1
        else:
            break
    return line


def duplicate_keys(root: yaml.Node) -> list[tuple[tuple, str]]:
    """(path of the repeated key, message) for every mapping key that appears twice."""
    found: list[tuple[tuple, str]] = []
    seen_nodes: set[int] = set()

    def walk(node: yaml.Node, path: tuple) -> None:
        if id(node) in seen_nodes:  # aliases can make cycles
            return
        seen_nodes.add(id(node))
        if isinstance(node, yaml.MappingNode):
            first: dict[str, int] = {}
            for key, value in node.value:
                if isinstance(key, yaml.ScalarNode) and key.value != "<<":
                    if key.value in first:
                        found.append((path + (key.value,),
                                      f"duplicate key (first at line {first[key.value]}); "
                                      "only the last one would count"))
                    else:
                        first[key.value] = key.start_mark.line + 1
                    walk(value, path + (key.value,))
        elif isinstance(node, yaml.SequenceNode):
            for i, item in enumerate(node.value):
                walk(item, path + (i,))

    walk(root, ())
    return found



def _yaml_error(exc: yaml.YAMLError) -> YamlError:
    if isinstance(exc, yaml.MarkedYAMLError):
        mark = exc.problem_mark or exc.context_mark
        what = ", ".join(p for p in (exc.context, exc.problem) if p)
        kind = "YAML syntax error" if isinstance(exc, (yaml.scanner.ScannerError, yaml.parser.ParserError,
                                                          yaml.composer.ComposerError)) else "invalid YAML"
        if mark is not None:
            return YamlError(f"{kind}: {what} (column {mark.column + 1})", mark.line + 1)
        return YamlError(f"{kind}: {what}")
    return YamlError("invalid YAML: " + " ".join(str(exc).split()))


def yaml_type(data: Any) -> str:
    return {list: "list", str: "string", int: "number", float: "number", bool: "boolean"}.get(
        type(data), type(data).__name__)
