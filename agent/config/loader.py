"""Reading configuration files: YAML documents in, a validated `Config` or every problem out.

DOC: standalone, the configuration is a YAML file or a directory of them (``*.yaml``/``*.yml``,
hidden files skipped, sorted by name, not recursive: a Kubernetes ConfigMap volume works as is).
Each file may hold several documents (``---``); empty documents are skipped.

Loading never stops at the first error. Every document of every file is checked and each problem
becomes a `Problem(file, object, field, message, line)`:

* ``object`` is ``Kind/name`` when the document says so, else ``document N`` (N counts the YAML
  documents of the file from 1); empty for problems of the whole file (unreadable, YAML syntax).
* ``field`` is the path as written in YAML, ``spec.routes[2].nextHops[0].gateway``, taken from
  pydantic's error ``loc`` (field names translated to their camelCase alias when pydantic gives
  the Python name; an unknown field keeps the spelling it has in the file).
* ``line`` is found by walking the YAML node tree (kept from the parse) along the same path, so
  every problem points at a line, not just syntax errors.

Documents are validated by alias only (``by_name=False``): ``next_hops:`` is an unknown field in a
file, exactly as the API server would see it, and the message suggests ``nextHops``. Besides
pydantic's checks the loader reports duplicate mapping keys (YAML silently keeps the last one),
unknown ``apiVersion``/``kind`` (naming the known kinds) and the rules between objects
(`agent.config.resolve.find_conflicts`: one AgentConfig, unique kind/name).

`load_path` raises `ConfigError` (``.problems``) or returns the `Config`. `config_fingerprint` is
a cheap stat-only summary of the files `load_path` would read, for polling. `validate_main` is
the body of ``route-agent validate PATH``.
"""

from __future__ import annotations

import difflib
import os
import sys
import types
import typing
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

import yaml
from pydantic import BaseModel, ValidationError

from .base import API_VERSION, Resource
from .resolve import Config, find_conflicts
from .kinds import KINDS

YAML_SUFFIXES = (".yaml", ".yml")
_KNOWN_KINDS = ", ".join(KINDS)


@dataclass(frozen=True, slots=True)
class Problem:
    """One thing wrong with the configuration. Prints as ``FILE[:LINE]: OBJECT: FIELD: MESSAGE``."""

    file: str
    object: str  # "StaticRoutes/uplinks", "document 3", or "" for the whole file
    field: str  # "spec.routes[2].nextHops[0].gateway", or "" for the whole object/file
    message: str
    line: int | None = None  # 1-based

    def __str__(self) -> str:
        where = self.file if self.line is None else f"{self.file}:{self.line}"
        return ": ".join(part for part in (where, self.object, self.field, self.message) if part)


class ConfigError(Exception):
    """The configuration is invalid; `problems` lists every problem found."""

    def __init__(self, problems: Sequence[Problem]):
        self.problems: list[Problem] = list(problems)
        super().__init__(format_problems(self.problems))


def format_problems(problems: Sequence[Problem]) -> str:
    """One line per problem: ``FILE[:LINE]: OBJECT: FIELD: MESSAGE`` (empty parts left out)."""
    return "\n".join(str(p) for p in problems)


# ---------------------------------------------------------------------------------------------
# Files
# ---------------------------------------------------------------------------------------------


def config_files(path: str | os.PathLike[str]) -> list[Path]:
    """The files `load_path` reads: the file itself, or a directory's YAML files sorted by name."""
    p = Path(path)
    if p.is_dir():
        return sorted(
            f for f in p.iterdir()
            if f.suffix in YAML_SUFFIXES and not f.name.startswith(".") and f.is_file()
        )
    return [p] if p.exists() else []


def config_fingerprint(path: str | os.PathLike[str]) -> tuple:
    """A cheap summary (stat only) of what `load_path(path)` would read.

    Equal fingerprints mean nothing changed: the same files with the same modification time, size
    and inode (a ConfigMap update swaps symlinks, which changes the inode). Never raises. Take the
    fingerprint before loading, so a change during the load is seen on the next poll.
    """
    p = Path(path)
    kind = "dir" if p.is_dir() else "file" if p.exists() else "missing"
    entries: list[tuple] = [(str(p), kind)]
    try:
        files = config_files(p)
    except OSError as exc:
        return (*entries, ("error", exc.errno))
    for f in files:
        try:
            st = f.stat()
        except OSError as exc:
            entries.append((str(f), None, None, exc.errno))
        else:
            entries.append((str(f), st.st_mtime_ns, st.st_size, st.st_ino))
    return tuple(entries)


# ---------------------------------------------------------------------------------------------
# Loading
# ---------------------------------------------------------------------------------------------


# libyaml's loader when PyYAML has it (3x faster on big files); node marks (line numbers) are
# the same
_YamlLoader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


@dataclass(frozen=True, slots=True)
class _Doc:
    file: str
    number: int  # 1-based position among the file's YAML documents
    node: yaml.Node
    data: Any

    @property
    def line(self) -> int:
        return self.node.start_mark.line + 1

    @property
    def label(self) -> str:
        if isinstance(self.data, dict):
            kind = self.data.get("kind")
            meta = self.data.get("metadata")
            name = meta.get("name") if isinstance(meta, dict) else None
            if isinstance(kind, str) and kind and isinstance(name, str) and name:
                return f"{kind}/{name}"
        return f"document {self.number}"

    def problem(self, field: str, message: str, loc: tuple = ()) -> Problem:
        return Problem(self.file, self.label, field, message, _line_of(self.node, loc))


class _Loader:
    """Accumulates the valid objects and the problems of any number of files."""

    def __init__(self) -> None:
        self.objects: list[tuple[Resource, _Doc]] = []
        self.problems: list[Problem] = []
        self.files = 0

    def path(self, path: str | os.PathLike[str]) -> None:
        p = Path(path)
        if not p.exists():
            self.problems.append(Problem(str(p), "", "", "no such file or directory"))
            return
        try:
            files = config_files(p)
        except OSError as exc:
            self.problems.append(Problem(str(p), "", "", f"cannot list directory: {exc.strerror}"))
            return
        for f in files:
            try:
                text = f.read_text(encoding="utf-8")
            except UnicodeDecodeError as exc:
                self.problems.append(Problem(str(f), "", "", f"not UTF-8 text: {exc.reason} at byte {exc.start}"))
            except OSError as exc:
                self.problems.append(Problem(str(f), "", "", f"cannot read: {exc.strerror}"))
            else:
                self.text(text, str(f))

    def text(self, text: str, file: str) -> None:
        self.files += 1
        for doc in self._documents(text, file):
            self._document(doc)

    def _documents(self, text: str, file: str) -> Iterator[_Doc]:
        loader = _YamlLoader(text)
        number = 0
        try:
            while loader.check_node():
                number += 1
                node = loader.get_node()
                yield _Doc(file, number, node, loader.construct_document(node))
        except yaml.YAMLError as exc:
            self.problems.append(_yaml_problem(file, exc))
        finally:
            loader.dispose()

    def _document(self, doc: _Doc) -> None:
        data = doc.data
        if data is None:
            return  # empty document
        for loc, message in _duplicate_keys(doc.node):
            self.problems.append(doc.problem(_format_loc(loc), message, loc))
        if not isinstance(data, dict):
            self.problems.append(doc.problem(
                "", f"expected a mapping with apiVersion, kind, metadata and spec, not a {_yaml_type(data)}"))
            return
        own: list[Problem] = []
        api = data.get("apiVersion")
        if "apiVersion" not in data:
            own.append(doc.problem("apiVersion", f"Field required: use {API_VERSION}"))
        elif api != API_VERSION:
            own.append(doc.problem(
                "apiVersion",
                f"unknown apiVersion {api!r}: known is {API_VERSION} (kinds {_KNOWN_KINDS})",
                ("apiVersion",)))
        kind = data.get("kind")
        cls = KINDS.get(kind) if isinstance(kind, str) else None
        if "kind" not in data:
            own.append(doc.problem("kind", f"Field required: known kinds are {_KNOWN_KINDS}"))
        elif cls is None:
            own.append(doc.problem("kind", f"unknown kind {kind!r}: known kinds are {_KNOWN_KINDS}", ("kind",)))
        self.problems.extend(own)
        if cls is None:
            return
        data = _as_configuration(data)
        try:
            obj = cls.model_validate(data, by_alias=True, by_name=False)
        except ValidationError as exc:
            for err in exc.errors():
                if err["loc"][:1] in (("apiVersion",), ("kind",)):
                    continue  # reported above, with a better message
                self.problems.append(_problem(doc, cls, err))
            return
        if not own:
            self.objects.append((obj, doc))

    def config(self) -> Config:
        """The Config of everything loaded; ConfigError when any problem was found."""
        objects = [obj for obj, _ in self.objects]
        for c in find_conflicts(objects):
            doc, first = self.objects[c.index][1], self.objects[c.first][1]
            loc = tuple(c.field.split("."))
            where = "" if c.first == c.index else f"; the first is {first.label} at {first.file}:{first.line}"
            self.problems.append(doc.problem(c.field, c.message + where, loc))
        if self.problems:
            raise ConfigError(self.problems)
        return Config.from_objects(objects)


# What the API server writes into an object: never configuration, so never an error either (an
# object read back with `kubectl get -o yaml` validates like the manifest that created it).
SERVER_METADATA = ("uid", "resourceVersion", "generation", "creationTimestamp", "managedFields",
                   "selfLink", "deletionTimestamp", "deletionGracePeriodSeconds", "ownerReferences",
                   "finalizers")


def _as_configuration(data: dict) -> dict:
    """The document without `status` and server-set metadata."""
    if "status" not in data and not (isinstance(data.get("metadata"), dict)
                                     and any(k in data["metadata"] for k in SERVER_METADATA)):
        return data
    data = {k: v for k, v in data.items() if k != "status"}
    if isinstance(data.get("metadata"), dict):
        data["metadata"] = {k: v for k, v in data["metadata"].items() if k not in SERVER_METADATA}
    return data


def load_path(path: str | os.PathLike[str]) -> Config:
    """Load a YAML file or a directory of YAML files; raise `ConfigError` with every problem."""
    loader = _Loader()
    loader.path(path)
    return loader.config()


def load_text(text: str, file: str = "<string>") -> Config:
    """Load YAML text (one or more documents); `file` names it in problems."""
    loader = _Loader()
    loader.text(text, file)
    return loader.config()


def validate_main(
    path: str | os.PathLike[str], *, out: TextIO | None = None, err: TextIO | None = None
) -> int:
    """``route-agent validate PATH``: print ``ok: N objects`` (0) or the problems to stderr (1)."""
    out = out or sys.stdout
    err = err or sys.stderr
    loader = _Loader()
    loader.path(path)
    try:
        loader.config()
    except ConfigError as exc:
        print(format_problems(exc.problems), file=err)
        n = len(exc.problems)
        print(f"invalid: {n} problem{'' if n == 1 else 's'}", file=err)
        return 1
    n = len(loader.objects)
    print(f"ok: {n} object{'' if n == 1 else 's'}", file=out)
    return 0


# ---------------------------------------------------------------------------------------------
# Problems: pydantic errors and YAML nodes -> file, line, field, message
# ---------------------------------------------------------------------------------------------


def _problem(doc: _Doc, cls: type[BaseModel], err: Any) -> Problem:
    loc = tuple(err["loc"])
    extra = err["type"] == "extra_forbidden"
    written, holder = _yaml_loc(cls, loc, extra)
    if extra:
        message = _unknown_field(str(loc[-1]), holder)
    else:
        message = err["msg"].removeprefix("Value error, ")
    return doc.problem(_format_loc(written), message, written)


def _format_loc(loc: Sequence[str | int]) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def _yaml_loc(cls: type[BaseModel], loc: tuple, extra: bool) -> tuple[tuple, type[BaseModel] | None]:
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


def _unknown_field(written: str, holder: type[BaseModel] | None) -> str:
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


def _line_of(node: yaml.Node, loc: Sequence[str | int]) -> int:
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


def _duplicate_keys(root: yaml.Node) -> list[tuple[tuple, str]]:
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


def _yaml_problem(file: str, exc: yaml.YAMLError) -> Problem:
    if isinstance(exc, yaml.MarkedYAMLError):
        mark = exc.problem_mark or exc.context_mark
        what = ", ".join(p for p in (exc.context, exc.problem) if p)
        kind = "YAML syntax error" if isinstance(exc, (yaml.scanner.ScannerError, yaml.parser.ParserError,
                                                          yaml.composer.ComposerError)) else "invalid YAML"
        if mark is not None:
            return Problem(file, "", "", f"{kind}: {what} (column {mark.column + 1})", mark.line + 1)
        return Problem(file, "", "", f"{kind}: {what}")
    return Problem(file, "", "", "invalid YAML: " + " ".join(str(exc).split()))


def _yaml_type(data: Any) -> str:
    return {list: "list", str: "string", int: "number", float: "number", bool: "boolean"}.get(
        type(data), type(data).__name__)
