"""Pydantic validation errors as the user wrote the document: YAML field paths and messages.

DOC: pydantic reports an error at a ``loc`` of Python field names and list indexes;
`field_error(model, error)` turns it into the path as written in YAML (each name translated to its
camelCase alias, ``spec.routes[2].nextHops[0].gateway`` once formatted by `format_loc`) and a
message without pydantic's ``Value error, `` prefix. An unknown field keeps the spelling it has in
the file (``next_hops`` must not become ``nextHops``) and its message suggests the closest known
field of the model that holds it.
"""

from __future__ import annotations

import difflib
import types
import typing
from collections.abc import Sequence
from typing import Any

from pydantic import BaseModel


def field_error(cls: type[BaseModel], err: Any) -> tuple[tuple, str]:
    """(the loc as written in YAML, the message) of one pydantic error of a `cls` document."""
    loc = tuple(err["loc"])
    extra = err["type"] == "extra_forbidden"
    written, holder = yaml_loc(cls, loc, extra)
    if extra:
        message = unknown_field(str(loc[-1]), holder)
    else:
        message = err["msg"].removeprefix("Value error, ")
    return written, message


def format_loc(loc: Sequence[str | int]) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def yaml_loc(cls: type[BaseModel], loc: tuple, extra: bool) -> tuple[tuple, type[BaseModel] | None]:
    """`loc` with field names spelt as in YAML, and the model holding its last element.

    An unknown field (``extra``) keeps its spelling: ``next_hops`` must not become ``nextHops``.
    """
    out: list[str | int] = []
    cur: Any = cls
    holder: type[BaseModel] | None = None
    for i, part in enumerate(loc):
        model = cur if isinstance(cur, type) and issubclass(cur, BaseModel) else None
        holder = model
        if isinstance(part, str) and model is not None and not (extra and i == len(loc) - 1):
            name = part if part in model.model_fields else _alias_to_name(model).get(part)
            if name is not None:
                field = model.model_fields[name]
                out.append(field.alias or name)
                cur = _unwrap(field.annotation)
                continue
        if isinstance(part, int) and typing.get_origin(cur) in (tuple, list):
            out.append(part)
            cur = _unwrap(typing.get_args(cur)[0])
            continue
        out.append(part)
        cur = None
    return tuple(out), holder


def _alias_to_name(model: type[BaseModel]) -> dict[str, str]:
    return {f.alias: n for n, f in model.model_fields.items() if f.alias}


def _unwrap(annotation: Any) -> Any:
    """Strip Annotated and Optional to reach the model or sequence type."""
    while True:
        origin = typing.get_origin(annotation)
        if origin is typing.Annotated:
            annotation = typing.get_args(annotation)[0]
        elif origin in (typing.Union, types.UnionType):
            args = [a for a in typing.get_args(annotation) if a is not type(None)]
            if len(args) != 1:
                return None
            annotation = args[0]
        else:
            return annotation


def unknown_field(written: str, holder: type[BaseModel] | None) -> str:
    if holder is None:
        return "unknown field"
    known = [f.alias or n for n, f in holder.model_fields.items()]
    squash = {k.replace("_", "").replace("-", "").lower(): k for k in known}
    guess = squash.get(written.replace("_", "").replace("-", "").lower())
    if guess is None:
        close = difflib.get_close_matches(written, known, n=1, cutoff=0.7)
        guess = close[0] if close else None
    if guess is not None:
        return f"unknown field; did you mean {guess!r}?"
    return f"unknown field; known fields are {', '.join(known)}"
