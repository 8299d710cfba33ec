"""Reading configuration files: YAML documents in, a validated `Config` or every problem out.

DOC: standalone, the configuration is a YAML file or a directory of them (``*.yaml``/``*.yml``,
hidden files skipped, sorted by name, not recursive: a Kubernetes ConfigMap volume works as is).
Each file may hold several documents (``---``); empty documents are skipped.

Loading never stops at the first error. Every document of every file is checked and each problem
becomes a `Problem(file, object, field, message, line)`:

* ``object`` is ``Kind/name`` when the document says so, else ``document N`` (N counts the YAML
  documents of the file from 1); empty for problems of the whole file (unreadable, YAML syntax).
* ``field`` is the path as written in YAML, ``spec.routes[2].nextHops[0].gateway``, taken from
  pydantic's error ``loc`` (`agent.config.fieldpath`: field names translated to their camelCase
  alias when pydantic gives the Python name; an unknown field keeps the spelling it has in the file).
* ``line`` is found by walking the YAML node tree (kept from the parse, `agent.config.yamldoc`)
  along the same path, so every problem points at a line, not just syntax errors.

Documents are validated by alias only (``by_name=False``): ``next_hops:`` is an unknown field in a
file, exactly as the API server would see it, and the message suggests ``nextHops``. Besides
pydantic's checks the loader reports duplicate mapping keys (YAML silently keeps the last one),
unknown ``apiVersion``/``kind`` (naming the known kinds) and the rules between objects
(`agent.config.resolve.find_conflicts`: one AgentConfig, unique kind/name).

What ``kubectl get ... -o yaml`` prints validates like the manifest that created it: a
``kind: List`` (or ``<Kind>List``) document is read item by item (each item's problems at its own
lines, unnamed items as ``document N items[i]``), server-set metadata (uid, resourceVersion,
managedFields ...) and ``status`` are dropped before validation, and `RouteAgentNodeState` objects
(the agents' status, e.g. from ``kubectl get route-agent -o yaml``) are skipped and counted.

`load_path` raises `ConfigError` (``.problems``) or returns the `Config`. `config_fingerprint` is
a cheap stat-only summary of the files `load_path` would read, for polling. `validate_main` is
the body of ``route-agent validate PATH``.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

import yaml
from pydantic import ValidationError

from .base import API_VERSION, Resource
from .resolve import Config, find_conflicts
from .fieldpath import field_error, format_loc
from .kinds import KINDS
from .nodestate import STATUS_KINDS
from .files import FileProblem, read_bounded
from .yamldoc import MAX_CHARS, YamlError, documents, duplicate_keys, line_of, yaml_type

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


@dataclass(frozen=True, slots=True)
class _Doc:
    file: str
    number: int  # 1-based position among the file's YAML documents
    node: yaml.Node
    data: Any
    item: int | None = None  # the position in the ``items`` of a ``kind: List`` document

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
        return f"document {self.number}" + ("" if self.item is None else f" items[{self.item}]")

    def problem(self, field: str, message: str, loc: tuple = ()) -> Problem:
        return Problem(self.file, self.label, field, message, line_of(self.node, loc))


class _Loader:
    """Accumulates the valid objects and the problems of any number of files."""

    def __init__(self) -> None:
        self.objects: list[tuple[Resource, _Doc]] = []
        self.problems: list[Problem] = []
        self.files = 0
        self.skipped: list[str] = []  # RouteAgentNodeState objects: written by the agents, not read
        self.sources: list[str] = []  # the paths and texts loaded, for the empty-configuration problem

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
        self.sources.append(str(p))
        for f in files:
            try:
                text = read_bounded(f, MAX_CHARS).decode("utf-8")
            except UnicodeDecodeError as exc:
                self.problems.append(Problem(str(f), "", "", f"not UTF-8 text: {exc.reason} at byte {exc.start}"))
            except FileProblem as exc:
                self.problems.append(Problem(str(f), "", "", str(exc)))
            else:
                self.text(text, str(f), source=False)

    def text(self, text: str, file: str, *, source: bool = True) -> None:
        if source:
            self.sources.append(file)
        self.files += 1
        try:
            for doc in self._documents(text, file):
                self._document(doc)
        except Exception as exc:  # noqa: BLE001 - no input may crash the agent (module DOC)
            self.problems.append(_unexpected(file, exc))

    def _documents(self, text: str, file: str) -> Iterator[_Doc]:
        try:
            for number, node, data in documents(text):
                yield _Doc(file, number, node, data)
        except YamlError as exc:
            self.problems.append(Problem(file, "", "", exc.message, exc.line))

    def _document(self, doc: _Doc) -> None:
        data = doc.data
        if data is None:
            return  # empty document
        for loc, message in duplicate_keys(doc.node):
            self.problems.append(doc.problem(format_loc(loc), message, loc))
        if not isinstance(data, dict):
            self.problems.append(doc.problem(
                "", f"expected a mapping with apiVersion, kind, metadata and spec, not a {yaml_type(data)}"))
            return
        if _is_list(data):
            self._list(doc)
        else:
            self._object(doc)

    def _list(self, doc: _Doc) -> None:
        """``kind: List`` (what ``kubectl get ... -o yaml`` prints for several objects) or a typed
        ``<Kind>List``: each item is read as a document of its own, its lines where they are."""
        items = doc.data.get("items")
        if items is None:
            return
        node = next((v for k, v in getattr(doc.node, "value", ()) if getattr(k, "value", None) == "items"), None)
        if not isinstance(items, list) or not isinstance(node, yaml.SequenceNode):
            self.problems.append(doc.problem("items", f"expected a list of objects, not a {yaml_type(items)}",
                                             ("items",)))
            return
        for i, (item, item_node) in enumerate(zip(items, node.value)):
            sub = _Doc(doc.file, doc.number, item_node, item, i)
            if not isinstance(item, dict):
                self.problems.append(sub.problem(
                    "", f"expected a mapping with apiVersion, kind, metadata and spec, not a {yaml_type(item)}"))
            else:
                self._object(sub)

    def _object(self, doc: _Doc) -> None:
        data = doc.data
        if data.get("kind") in STATUS_KINDS and data.get("apiVersion") == API_VERSION:
            self.skipped.append(doc.label)  # the agents' status objects, e.g. `kubectl get route-agent`
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
                written, message = field_error(cls, err)
                self.problems.append(doc.problem(format_loc(written), message, written))
            return
        if own:
            return
        for loc, message in obj.file_problems():
            self.problems.append(doc.problem(format_loc(loc), message, loc))
        self.objects.append((obj, doc))

    def config(self) -> Config:
        """The Config of everything loaded; ConfigError when any problem was found."""
        objects = [obj for obj, _ in self.objects]
        for c in find_conflicts(objects):
            doc, first = self.objects[c.index][1], self.objects[c.first][1]
            loc = tuple(c.field.split("."))
            where = "" if c.first == c.index else f"; the first is {first.label} at {first.file}:{first.line}"
            self.problems.append(doc.problem(c.field, c.message + where, loc))
        if not objects and not self.problems:
            self.problems.append(Problem(", ".join(self.sources) or "<nothing>", "", "", EMPTY_MESSAGE))
        if self.problems:
            raise ConfigError(self.problems)
        return Config.from_objects(objects)


EMPTY_MESSAGE = (
    "no configuration objects: an empty configuration would remove every route of the agent, and "
    "a file truncated while being rewritten looks exactly like this, so it is refused (a running "
    "agent keeps its last good configuration). To run with nothing on purpose, keep one object, "
    "e.g. an AgentConfig with only metadata.name")


def _unexpected(file: str, exc: BaseException) -> Problem:
    """An exception no check foresaw, as a problem of the file (never a crash of the agent)."""
    text = " ".join(str(exc).split())
    return Problem(file, "", "", f"cannot load: {type(exc).__name__}: {text[:200]}")


# What the API server writes into an object: never configuration, so never an error either (an
# object read back with `kubectl get -o yaml` validates like the manifest that created it).
SERVER_METADATA = ("uid", "resourceVersion", "generation", "creationTimestamp", "managedFields",
                   "selfLink", "deletionTimestamp", "deletionGracePeriodSeconds", "ownerReferences",
                   "finalizers")


def _is_list(data: dict) -> bool:
    """``kind: List`` (apiVersion v1) or ``<Kind>List`` of a routeagent.io kind, with ``items``."""
    kind, api = data.get("kind"), data.get("apiVersion")
    if not isinstance(kind, str) or "items" not in data:
        return False
    return (kind == "List" and api == "v1") or (
        api == API_VERSION and kind.endswith("List") and (kind[:-4] in KINDS or kind[:-4] in STATUS_KINDS))


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
    return _load(_Loader(), lambda loader: loader.path(path), str(path))


def load_text(text: str, file: str = "<string>") -> Config:
    """Load YAML text (one or more documents); `file` names it in problems."""
    return _load(_Loader(), lambda loader: loader.text(text, file), file)


def _load(loader: _Loader, read: Callable[[_Loader], None], where: str) -> Config:
    """Whatever the input, the `Config` or `ConfigError`: nothing else escapes."""
    try:
        read(loader)
        return loader.config()
    except ConfigError:
        raise
    except Exception as exc:  # noqa: BLE001 - RecursionError, MemoryError ...: the module DOC
        raise ConfigError([*loader.problems, _unexpected(where, exc)]) from None


def validate_main(
    path: str | os.PathLike[str], *, out: TextIO | None = None, err: TextIO | None = None
) -> int:
    """``route-agent validate PATH``: print ``ok: N objects`` (0) or the problems to stderr (1)."""
    out = out or sys.stdout
    err = err or sys.stderr
    loader = _Loader()
    try:
        _load(loader, lambda loader: loader.path(path), str(path))
    except ConfigError as exc:
        print(format_problems(exc.problems), file=err)
        n = len(exc.problems)
        print(f"invalid: {n} problem{'' if n == 1 else 's'}", file=err)
        return 1
    n = len(loader.objects)
    skipped = len(loader.skipped)
    note = f" ({skipped} RouteAgentNodeState skipped: status the agents write)" if skipped else ""
    print(f"ok: {n} object{'' if n == 1 else 's'}{note}", file=out)
    return 0


