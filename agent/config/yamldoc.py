"""YAML text to documents: composed node trees (for line numbers) and their plain data.

DOC: `documents(text)` yields, per YAML document of the text, its number (from 1), its root node
(``start_mark`` gives the line of every key and item) and the constructed data, with PyYAML's
safe loader (libyaml's when available: 3x faster on big files, the same marks). A syntax or
construction error raises `YamlError` (line and message) after the documents before it.
`line_of(node, loc)` finds the line of a field path in a node tree; `duplicate_keys(node)` finds
the mapping keys YAML would silently overwrite.

Hostile input: PyYAML's composer is recursive (in C with libyaml), so a small file nested a few
thousand levels deep raises RecursionError or overflows the C stack, and aliases let a few lines
stand for billions of nodes ("billion laughs") that validation would then walk. So before
composing, `check_bounds` reads the text's event stream (the parser is iterative, whatever the
depth) and refuses, with the line where the bound is crossed:

* more than `MAX_CHARS` characters;
* collections nested deeper than `MAX_DEPTH` (counting what aliases bring in at their place);
* more than `MAX_NODES` nodes once every alias is expanded (counted, never built);
* an alias inside the collection it names (a recursive structure).

Whatever else goes wrong while building the data (an integer too long to convert ...) is a
`YamlError` too: `documents` raises nothing else.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import yaml

# libyaml's loader when PyYAML has it (3x faster on big files); node marks (line numbers) are
# the same
_YamlLoader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


MAX_CHARS = 8 * 2**20  # a configuration of 65,536 prefixes is ~2 MiB
MAX_DEPTH = 64  # the deepest configuration (a policy's prefix set) nests 8 collections
MAX_NODES = 1_000_000  # scalars and collections, aliases expanded

_START = (yaml.SequenceStartEvent, yaml.MappingStartEvent)
_END = (yaml.SequenceEndEvent, yaml.MappingEndEvent)


class YamlError(Exception):
    """The text is not YAML the loader accepts: `message` (column included), at `line` (1-based)."""

    def __init__(self, message: str, line: int | None = None):
        super().__init__(message)
        self.message = message
        self.line = line


def documents(text: str) -> Iterator[tuple[int, yaml.Node, Any]]:
    """(number, root node, data) of each document of `text`; `YamlError` where it stops being YAML."""
    check_bounds(text)
    loader = _YamlLoader(text)
    number = 0
    node = None
    try:
        while loader.check_node():
            number += 1
            node = loader.get_node()
            yield number, node, loader.construct_document(node)
    except yaml.YAMLError as exc:
        raise _yaml_error(exc) from None
    except (ValueError, TypeError, OverflowError, RecursionError, MemoryError) as exc:
        line = None if node is None else node.start_mark.line + 1
        raise YamlError(f"invalid YAML: {type(exc).__name__}: {_short(exc)}", line) from None
    finally:
        loader.dispose()


def check_bounds(text: str) -> None:
    """`YamlError` when `text` crosses a bound of the module DOC; a syntax error is left to the
    composer (which reports it the same way), the bounds hold up to it."""
    if len(text) > MAX_CHARS:
        raise YamlError(f"too large: {len(text)} characters, at most {MAX_CHARS}")
    parser = _YamlLoader(text)
    open_: list[tuple[int, str | None]] = []  # per open collection: (nodes before it, anchor)
    anchors: dict[str, tuple[int, int]] = {}  # anchor -> (expanded nodes, height) of its node
    heights: list[int] = []  # height of the tallest finished child, per open collection
    nodes = 0
    try:
        while parser.check_event():
            event = parser.get_event()
            line = event.start_mark.line + 1
            if isinstance(event, yaml.DocumentStartEvent):
                anchors = {}  # anchors are per document
                continue
            if isinstance(event, _START):
                if len(open_) >= MAX_DEPTH:
                    raise YamlError(f"nested deeper than {MAX_DEPTH} levels", line)
                open_.append((nodes, event.anchor))
                heights.append(0)
                nodes += 1
                size, height, anchor = 0, None, None
            elif isinstance(event, _END):
                start, anchor = open_.pop()
                height = heights.pop() + 1
                size = 0  # counted as they came
                if anchor is not None:
                    anchors[anchor] = (nodes - start, height)
            elif isinstance(event, yaml.ScalarEvent):
                size, height, anchor = 1, 1, event.anchor
                if anchor is not None:
                    anchors[anchor] = (1, 1)
            elif isinstance(event, yaml.AliasEvent):
                if any(a == event.anchor for _, a in open_):
                    raise YamlError(f"alias *{event.anchor} inside the node it names: a recursive "
                                    "structure is not configuration", line)
                size, height = anchors.get(event.anchor, (1, 1))  # unknown: the composer says so
                if len(open_) + height > MAX_DEPTH:
                    raise YamlError(f"nested deeper than {MAX_DEPTH} levels (through alias "
                                    f"*{event.anchor})", line)
            else:
                continue
            nodes += size
            if nodes > MAX_NODES:
                raise YamlError(f"more than {MAX_NODES} nodes (aliases expanded)", line)
            if height is not None and heights:
                heights[-1] = max(heights[-1], height)
    except yaml.YAMLError:
        return
    finally:
        parser.dispose()


def _short(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return text if len(text) <= 200 else text[:200] + "..."


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
