"""Route ops in runs: the ADDs of a table being learned held as a list of prefixes and their route,
with no `Op` or `NhRouteOp` per route unless someone asks for one.

DOC: the bulk lanes (`agent.fib.bulk`) plan a batch of new routes as one `AddRun` (the prefixes,
and one route for all of them or a route each) and the nexthop layer expands it into one
`NhAddRun` (the object writes first, then every prefix pointing at its route's group). Both are
read-only sequences of ops to everything else: `len`, indexing, iteration and ``==`` work as on
the list of `Op` / `NhRouteOp` the general loops build, and the first index or iteration builds
that list once and keeps it, so an op handed out twice is the same object (ops are matched to
their errors by identity). The hot path never builds it: the encoder packs a run's messages from
the prefixes (`Encoder.encode_batch` on an `OpsSlice`), the writer cuts the batch into slices
without copying, and the lanes' `done` reads the prefixes. Only a failure (an error to match,
an encoding to retry op by op) or a general loop builds the ops, at the cost the list would have
had from the start.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import repeat

from ..core.model import KernelRoute, Prefix
from .types import OpKind, new_nh_route_op, new_op

ADD = OpKind.ADD


def _column(one, each: list | None, n: int, start: int, stop: int | None):
    """Items start:stop of a run's column of n: `one` for all of them, else ``each[i]``."""
    if each is None:
        return repeat(one, len(range(n)[start:stop]))
    return iter(each[start:stop])


def _same_ops(self, other) -> bool:
    """``==`` of a run or a slice of one: the same ops as `other`, a list, tuple, run or slice."""
    if isinstance(other, (list, tuple, LazyOps, OpsSlice)):
        return list(self) == list(other)
    return NotImplemented


class LazyOps(Sequence):
    """A sequence of ops built on first use (see module doc); subclasses say how (`_build`)."""

    __slots__ = ("_items",)

    def __init__(self) -> None:
        self._items: list | None = None

    @property
    def items(self) -> list:
        """The ops as a list, built once."""
        items = self._items
        if items is None:
            items = self._items = self._build()
        return items

    def _build(self) -> list:
        raise NotImplementedError

    def __len__(self) -> int:
        raise NotImplementedError

    def __getitem__(self, i):
        if i.__class__ is slice:
            start, stop, step = i.indices(len(self))
            if step == 1:
                return OpsSlice(self, start, max(start, stop))
            return self.items[i]
        return self.items[i]

    def __iter__(self):
        return iter(self.items)

    __eq__ = _same_ops
    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"{type(self).__name__}({len(self)} ops)"


class AddRun(LazyOps):
    """ADD ops of `prefixes`, each with its route: `route` for all of them, else ``routes[i]``."""

    __slots__ = ("prefixes", "route", "routes")

    def __init__(self, prefixes: list[Prefix], route: KernelRoute | None, routes: list[KernelRoute] | None) -> None:
        super().__init__()
        self.prefixes = prefixes
        self.route = route
        self.routes = routes

    def __len__(self) -> int:
        return len(self.prefixes)

    def route_iter(self, start: int = 0, stop: int | None = None):
        """The routes of prefixes[start:stop], in order."""
        return _column(self.route, self.routes, len(self.prefixes), start, stop)

    def ops_of(self, start: int = 0, stop: int | None = None) -> list:
        """New ADD ops of prefixes[start:stop] (the run's own, `items`, are built from all)."""
        return list(map(new_op, zip(repeat(ADD), self.prefixes[start:stop], self.route_iter(start, stop))))

    def _build(self) -> list:
        return self.ops_of()


class NhAddRun(LazyOps):
    """The kernel ops of an `AddRun` through nexthop groups: `head` (the object writes, real ops)
    and then one route op per prefix of `run`, pointing at `gid` (or ``gids[i]``)."""

    __slots__ = ("head", "run", "gid", "gids")

    def __init__(self, head: list, run: AddRun, gid: int | None, gids: list[int] | None) -> None:
        super().__init__()
        self.head = head
        self.run = run
        self.gid = gid
        self.gids = gids

    def __len__(self) -> int:
        return len(self.head) + len(self.run.prefixes)

    def gid_iter(self, start: int = 0, stop: int | None = None):
        """The group ids of the run's prefixes[start:stop], in order."""
        return _column(self.gid, self.gids, len(self.run.prefixes), start, stop)

    def route_ops(self, ops: list, start: int = 0, stop: int | None = None) -> list:
        """Route ops pointing `ops` (the run's ADDs start:stop) at their groups."""
        return list(map(new_nh_route_op, zip(ops, self.gid_iter(start, stop))))

    def _build(self) -> list:
        return self.head + self.route_ops(self.run.items)


class OpsSlice(Sequence):
    """``ops[start:stop]`` of a `LazyOps`, without copying (the writer's batches of a run)."""

    __slots__ = ("parent", "start", "stop")

    def __init__(self, parent: LazyOps, start: int, stop: int) -> None:
        self.parent, self.start, self.stop = parent, start, stop

    def __len__(self) -> int:
        return self.stop - self.start

    def __getitem__(self, i):
        if i.__class__ is slice:
            return self.parent.items[self.start:self.stop][i]
        n = self.stop - self.start
        if i < 0:
            i += n
        if not 0 <= i < n:
            raise IndexError(i)
        return self.parent.items[self.start + i]

    def __iter__(self):
        return iter(self.parent.items[self.start:self.stop])

    __eq__ = _same_ops
    __hash__ = None  # type: ignore[assignment]


def object_ops(ops: Sequence, pos: int) -> Sequence:
    """``ops[pos:]`` as far as nexthop object writes go: for an `NhAddRun`, only its head can
    hold any (the run is route ops), read without building the run's ops."""
    if ops.__class__ is NhAddRun:
        return ops.head[pos:]
    if ops.__class__ is AddRun:
        return ()
    return ops[pos:] if pos < len(ops) else ()


def kind_counts_of_run(ops: Sequence) -> dict[OpKind, int] | None:
    """For an `AddRun` / `NhAddRun`: how many kernel ops of each kind it holds, without building
    its ops (the head's kinds counted one by one); None for anything else."""
    if ops.__class__ is AddRun:
        return {ADD: len(ops)} if len(ops) else {}
    if ops.__class__ is not NhAddRun:
        return None
    out: dict[OpKind, int] = {}
    for k in ops.head:
        out[k.kind] = out.get(k.kind, 0) + 1
    if ops.run.prefixes:
        out[ADD] = out.get(ADD, 0) + len(ops.run.prefixes)
    return out
