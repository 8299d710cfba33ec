"""Kernel nexthop objects for our routes: which object a route points at, and the object writes
that go with the reconciler's route ops (pure logic, no I/O).

DOC: with `spec.fib.nexthopObjects` on, a unicast route of ours does not carry its next hops:
it points (RTA_NH_ID) at a **group** object of ours, and the group's members are **single**
next-hop objects of ours (`ip nexthop` shows both, `proto route-agent`). Every route points at a
group, even a one-member group, so that any change of membership can be made in place (the
kernel refuses to turn a single next hop into a group by replace). Blackhole & co., next hops
without a device and next hops of the other address family stay plain routes.

The reconciler (`agent.fib.reconciler.FibState`) keeps working in "expanded" terms (a prefix's
`KernelRoute` with its next hops) and knows nothing of objects. `NhLayer` sits between its
`plan()` and the writer: `expand(ops)` turns route ops into object writes plus route writes;
`done(kops, errors)` records the outcome and hands back the errors in terms of the reconciler's
ops. Objects are created before the routes that use them (in the same batch, the kernel
processes messages in order), and deleted only once the layer has *confirmed* (from a completed
batch or a dump) that nothing uses them any more, in a later batch: deleting a nexthop object
deletes every route still using it, so a route write that failed must never be followed by the
delete of the group it still uses. Unused objects adopted at start are kept until the sync gate
opens. A failed object delete waits for the retry timer (no spinning).

**Group identity follows the group's users, not its members.** A group id is not bound to one
member set for ever; it is bound to the set of prefixes that use it: each of their routes in the
reconciler's `actual` table carries the group's id, and `users` counts them (the stamps and the
counting are `agent.fib.nhusers`). When one plan moves *every* user of group G to one and the
same new next-hop set S (a peer or next hop failed: the RIB rewrote every prefix that went
through {A, B} to {B}; or it recovered and the RIB put A back everywhere at once), the layer
does not rewrite those routes: it replaces G in place with the members of S (`NhOp(REPLACE)`
carrying the route ops it stands for), one write whatever the number of routes. When only some
users move, those are pointed at a group for S (an existing one, else a new one) route by route,
and G keeps the others: that is the per-route BGP clean-up, and is exact (no prefix ever
forwards through a next hop the RIB did not choose for it). Compared with binding groups to
origin/peer sets this needs nothing from the RIB and cannot send a prefix to a peer that never
announced it; the price is that a change spread over several plans (a peer re-sending its table
UPDATE by UPDATE) costs route writes, which is the slow, non-urgent direction. New routes
wanting S reuse the group indexed for S (`by_key`); two groups may end up with the same members
(one of them changed in place), which is harmless. **A route op whose group already is what it
wants** (BFD shrank the group ahead of the RIB, `without_gateway`: the kernel forwards as the
RIB is about to decide) needs no write at all: `expand` settles it (`take_settled`), however
many of the group's users the plan holds, so the RIB's clean-up after a failure may come in
slices.

Ids: ours are allocated from ``protocol << 20`` upwards, skipping every id the kernel has
(foreign objects are never written, only read to expand routes that point at them). An ADD that
meets an id someone took meanwhile fails with EEXIST; the id is then marked taken.
"""

from __future__ import annotations

import errno
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from itertools import repeat
from operator import is_, itemgetter
from typing import TYPE_CHECKING

from ..core.model import KernelRoute, NextHop, Prefix, nexthops
from . import bulk
from .nhkeys import _V6_FLAG, expand_all, group_key, single_key
from .nhusers import GroupUsers
from .types import NhObject, NhOp, NhRouteOp, Op, OpError, OpKind, new_nh_route_op

if TYPE_CHECKING:
    from .reconciler import FibState

ADD, REPLACE, DELETE = OpKind.ADD, OpKind.REPLACE, OpKind.DELETE
_NONE = object()
_third = itemgetter(2)


class NhLayer(GroupUsers):
    """Our nexthop objects, who uses them, and the translation of route ops (see module doc)."""

    def __init__(self, protocol: int, fib: FibState) -> None:
        self.protocol = protocol
        # the reconciler's table of our routes in the kernel (`FibState.actual`, the same dict):
        # its routes carry the id of the group they point at (module doc)
        self.actual = fib.actual
        fib.stamp_moved = self.stamp_moved
        self.objects: dict[int, NhObject] = {}  # ours, as the kernel has them (confirmed)
        self.foreign: dict[int, NhObject] = {}  # not ours: read, never written
        self.key_of: dict[int, tuple | None] = {}
        self.by_key: dict[tuple, int] = {}
        self.users: dict[int, int] = {}  # nexthop id -> how many routes in `actual` are stamped with it
        # (id(route), nexthop id) -> (route, the route stamped with that id): one stamped object
        # per route and group, not one per prefix (`stamp`)
        self._stamps: dict[tuple[int, int], tuple[KernelRoute, KernelRoute]] = {}
        # what `restamp` stamps once the reconciler recorded the ops: (op, group) pairs, and the
        # whole batch of a bulk lane (`bulk.nh_done_added`)
        self._restamp: list = []
        self.bulk_restamp: tuple | None = None
        self.expansion: dict[int, tuple[NextHop, ...]] = {}
        self.version = 0
        self.taken: set[int] = set()  # ids refused with EEXIST (someone else's)
        self.delete_failed: set[int] = set()
        self.gate_open = False
        self.group_writes = 0  # in-place group replaces confirmed (metrics, tests)
        self.urgent: list[NhOp] = []  # group shrinks ahead of the RIB (`without_gateway`)
        self.dead: set[str] = set()  # gateways whose routes the RIB is still withdrawing
        # route ops of `expand` that need no kernel write (their group already is what they
        # want): the caller records them as done at once (`take_settled`)
        self.settled: list[Op] = []
        self.bulk: tuple | None = None  # what `bulk.expand_new` planned, for `bulk.nh_done_added`
        self._base = max(1, protocol << 20)
        self._next = self._base

    # ---- kernel state ----
    def resync(self, objects: Mapping[int, NhObject], nhid: Mapping[Prefix, int],
               routes: Mapping[Prefix, KernelRoute],
               extra: Mapping[Prefix, tuple[KernelRoute, ...]] | None = None) -> None:
        """A dump: every nexthop object of the namespace, and the id each route of ours points
        at (start-up adoption: nothing is written; periodic scan, overrun, repairs). Runs after
        the reconciler took the dump's routes (`FibState.adopt` / `resync`): every route in
        `actual` is stamped with the id the dump gives its prefix, and the users are counted
        again from the stamps."""
        self.objects = {i: o for i, o in objects.items() if o.protocol == self.protocol}
        self.foreign = {i: o for i, o in objects.items() if o.protocol != self.protocol}
        self.key_of, self.by_key = {}, {}
        for i in sorted(self.objects):
            self._index(i, self.objects[i])
        self.stamp_all(nhid, routes, extra or {})
        self.delete_failed.clear()
        self._reexpand()

    def _key_of_members(self, members: tuple[tuple[int, int], ...]) -> tuple | None:
        """The key of a group of these members (None: not a group of our own singles)."""
        hops, fams = [], set()
        for member, weight in members:
            single = self.objects.get(member)  # only groups of our own singles are reused
            if single is None or single.hop is None or single.members:
                return None
            hops.append(NextHop(single.hop.gateway, single.hop.dev, weight))
            fams.add(single.family)
        return ("g", fams.pop(), nexthops(*hops)) if len(fams) == 1 else None

    def _index(self, nhid: int, obj: NhObject) -> None:
        if obj.members:
            key = self._key_of_members(obj.members)
        else:
            key = single_key(obj.family, obj.hop) if obj.hop is not None and obj.hop.weight == 1 else None
        self.key_of[nhid] = key
        if key is not None:
            self.by_key.setdefault(key, nhid)

    def _unindex(self, nhid: int) -> None:
        key = self.key_of.pop(nhid, None)
        if key is not None and self.by_key.get(key) == nhid:
            del self.by_key[key]
            other = next((i for i, k in self.key_of.items() if k == key), None)
            if other is not None:
                self.by_key[key] = other

    def _reexpand(self) -> None:
        self.expansion = expand_all({**self.foreign, **self.objects})
        self.version += 1

    def describe(self, nhid: int) -> str:
        """`ip nexthop`-like text of one of our objects (for `explain` and `show fib`)."""
        obj = self.objects.get(nhid) or self.foreign.get(nhid)
        if obj is None:
            return f"id {nhid} (unknown)"
        if obj.members:
            return f"id {nhid} group " + "/".join(
                f"{m},{w}" if w != 1 else str(m) for m, w in obj.members)
        return f"id {nhid} {obj.hop}"

    # ---- planning ----
    def without_gateway(self, gateway: str) -> int:
        """A next hop died (BFD down for the peer at `gateway`): ahead of the RIB, plan an in-place
        REPLACE of every group of ours that has members through `gateway` and members that do
        not, keeping the others (groups only through `gateway` cannot be emptied: the RIB's
        clean-up deals with their routes). They go first in the next batch (`expand`); the
        routes keep their group. When the RIB's clean-up then moves users of such a group to
        exactly its remaining members (all of them at once or a slice at a time), that needs no
        kernel write at all: `expand` settles those route ops (`take_settled`). Returns the
        number of groups planned."""
        self.dead.add(gateway)
        return self._shrink_dead()

    def revive(self, gateway: str) -> None:
        """The RIB's clean-up after `gateway` died is over: nothing wants it any more."""
        self.dead.discard(gateway)

    def _shrink_dead(self) -> int:
        """Plan the shrink of every confirmed group with members through a dead gateway and
        members that are not (not yet planned). Also run after every batch while a clean-up is
        under way: a group created or changed by a batch that was in flight when the gateway
        died is confirmed only then."""
        dead, objects = self.dead, self.objects
        planned = {k.id for k in self.urgent}
        for gid, obj in objects.items():
            if not obj.members or gid in planned:
                continue
            keep = tuple((m, w) for m, w in obj.members
                         if (h := objects.get(m)) is None or h.hop is None or h.hop.gateway not in dead)
            if keep and len(keep) < len(obj.members):
                self.urgent.append(NhOp(REPLACE, gid, 0, None, keep))
        return len(self.urgent)

    def expand(self, ops: Sequence[Op], retry_failed: bool = False) -> list:
        """The kernel ops for the reconciler's `ops`: new singles, new and in-place groups,
        then the route writes; or, with nothing else to do, deletes of unused objects."""
        new = bulk.expand_new(self, ops)
        if new is not None:
            return new
        singles: list[NhOp] = []
        groups: list[NhOp] = []
        routes: list = []
        planned: dict[tuple, int] = {}
        changing: set[int] = set()
        carried: set[int] = set()
        moving: dict[int, list[Op]] = defaultdict(list)
        actual = self.actual
        for op in ops:
            if op[0] is REPLACE:
                cur = actual.get(op.prefix)
                if (cur is not None and cur.nhid and cur.metric == op.route.metric
                        and self.key_of.get(cur.nhid)):
                    moving[cur.nhid].append(op)
        shrinking = {k.id: self._key_of_members(k.members) for k in self.urgent} if self.urgent else {}
        for gid, gops in moving.items():
            old = self.key_of.get(gid)
            already = (old, shrinking.get(gid))  # what the group is, or is about to be
            route0 = gops[0][2]
            if not all(map(is_, map(_third, gops), repeat(route0))):
                # users moving to different routes: those that want what the group already is
                # are settled, the others are written route by route
                same = self._already(gops, already)
                if same:
                    self._settle(gid, same, carried)
                continue
            key = group_key(gops[0].prefix, route0)
            if key is not None and key in already:
                # the group already is what these routes want (shrunk in place ahead of the
                # RIB, `without_gateway`, or about to be: the shrink goes first in this batch):
                # the RIB caught up, nothing to write, however many of the group's users this
                # plan holds
                self._settle(gid, gops, carried)
                continue
            if (key is None or old[0] != "g" or key[1] != old[1]
                    or len(gops) != self.users.get(gid, 0)):
                continue
            members = self._members(key, planned, singles)
            groups.append(NhOp(REPLACE, gid, 0, None, members, tuple(gops)))
            changing.add(gid)
            planned.setdefault(key, gid)
            carried.update(id(o) for o in gops)
        # the group of each route object met in this call, per family (routes are shared by many
        # prefixes, and the ops hold them, so their ids are stable here): one lookup per object
        seen: tuple[dict[int, int | None], dict[int, int | None]] = ({}, {})
        seen4, seen6 = seen
        add = routes.append
        for op in ops:
            if carried and id(op) in carried:
                continue
            kind, prefix, route = op
            if kind is DELETE:
                add(op)
                continue
            known = seen6 if prefix & _V6_FLAG else seen4
            gid = known.get(id(route), _NONE)
            if gid is _NONE:
                gid = known[id(route)] = self._group_of(op, planned, singles, groups, changing)
            add(op if gid is None else new_nh_route_op((op, gid)))
        kops = singles + groups + routes
        if self.urgent:
            kops, self.urgent = self.urgent + kops, []
        elif not kops:
            kops = self._garbage(retry_failed)
        return kops

    def _already(self, gops: list, already: tuple) -> list:
        """The ops of `gops` (users of one group, different routes) whose route is what the
        group is or is about to be (`already`): one key per route object."""
        keys: dict[int, tuple | None] = {}
        out = []
        for op in gops:
            key = keys.get(id(op[2]), _NONE)
            if key is _NONE:
                key = keys[id(op[2])] = group_key(op[1], op[2])
            if key is not None and key in already:
                out.append(op)
        return out

    def _settle(self, gid: int, gops: list, carried: set) -> None:
        """Route ops that need no write: their group `gid` already is what they want."""
        self.settled += gops
        self._restamp += zip(gops, repeat(gid))
        carried.update(id(o) for o in gops)

    def take_settled(self) -> list[Op]:
        """The route ops the last `expand` found already true in the kernel (to record as done;
        they are not among its kernel ops)."""
        out, self.settled = self.settled, []
        return out

    def _group_of(self, op: Op, planned: dict, singles: list, groups: list, changing: set) -> int | None:
        """The group `op`'s route goes through (None: a plain route), planned or new."""
        key = group_key(op.prefix, op.route)
        if key is None:
            return None
        gid = planned.get(key)
        if gid is None:
            gid = self.by_key.get(key)
            if gid is None or gid in changing:
                members = self._members(key, planned, singles)  # (singles get the lower ids)
                gid = self._alloc(planned)
                groups.append(NhOp(ADD, gid, 0, None, members))
            planned[key] = gid
        return gid

    def _members(self, key: tuple, planned: dict, singles: list) -> tuple[tuple[int, int], ...]:
        family, hops = key[1], key[2]
        out = []
        for hop in hops:
            skey = single_key(family, NextHop(hop.gateway, hop.dev))
            sid = planned.get(skey) or self.by_key.get(skey)
            if sid is None:
                sid = self._alloc(planned)
                singles.append(NhOp(ADD, sid, family, NextHop(hop.gateway, hop.dev)))
                planned[skey] = sid
            out.append((sid, hop.weight))
        return tuple(out)

    def _alloc(self, planned: dict) -> int:
        busy = set(planned.values())
        nhid = self._next
        while (nhid in self.objects or nhid in self.foreign or nhid in self.taken or nhid in busy):
            nhid += 1
            if nhid >= 0xFFFFFFFF:
                nhid = self._base
        self._next = nhid + 1
        return nhid

    def _garbage(self, retry_failed: bool) -> list[NhOp]:
        """Deletes of our objects nothing uses (confirmed): groups without routes first; singles
        that no group references go in the batch after (their groups' deletes confirmed)."""
        if not self.gate_open:
            return []
        skip = () if retry_failed else self.delete_failed
        groups = [i for i, o in self.objects.items()
                  if o.members and not self.users.get(i) and i not in skip]
        if groups:
            return [NhOp(DELETE, i) for i in sorted(groups)]
        referenced = {m for o in self.objects.values() for m, _w in o.members}
        return [NhOp(DELETE, i) for i, o in sorted(self.objects.items())
                if not o.members and i not in referenced and not self.users.get(i) and i not in skip]

    # ---- outcome ----
    def done(self, kops: Iterable, errors: Iterable[OpError]) -> list[OpError]:
        """Record the outcome of `kops` (from `expand`); returns the errors in terms of the
        reconciler's ops (an in-place replace that failed fails every route op it carried)."""
        if bulk.nh_done_added(self, kops, errors):
            return []
        failed = {id(e.op): e for e in errors}
        out: list[OpError] = []
        changed = False
        actual, users, restamp = self.actual, self.users, self._restamp.append
        for k in kops:
            err = failed.get(id(k)) if failed else None
            cls = k.__class__
            if cls is NhRouteOp:
                if err is not None:
                    out.append(OpError(k.op, err.errno, err.message))
                    continue
                nhid = k[1]  # the route now points at `nhid`
                cur = actual.get(k[0][1])
                old = cur.nhid if cur is not None else 0
                if old != nhid:
                    if old:
                        self._unuse(old)
                    users[nhid] = users.get(nhid, 0) + 1
                restamp(k)  # (the reconciler stores the op's route: stamped after it)
            elif cls is NhOp:
                changed |= self._nh_done(k, err)
                if err is not None:
                    out += [OpError(o, err.errno, err.message) for o in k.carries]
                elif k.carries:  # the routes changed in place: still through this group
                    self._restamp += zip(k.carries, repeat(k.id))
            else:
                if err is not None:
                    out.append(err)
                    continue
                cur = actual.get(k.prefix)
                if cur is not None and cur.nhid and (k.kind is not DELETE or cur == k.route):
                    self._unuse(cur.nhid)  # deleted (as the reconciler will find), or now a plain route
        if changed:
            self._reexpand()
            if self.dead:
                self._shrink_dead()
        return out

    def _nh_done(self, k: NhOp, err: OpError | None) -> bool:
        if err is not None:
            if k.kind is DELETE:
                self.delete_failed.add(k.id)
            elif k.kind is ADD and err.errno == errno.EEXIST:
                self.taken.add(k.id)
            return False
        if k.kind is DELETE:
            self.objects.pop(k.id, None)
            self._unindex(k.id)
            self.delete_failed.discard(k.id)
            self.users.pop(k.id, None)
            return True
        obj = NhObject(k.id, self.protocol, k.family, k.hop, k.members)
        if k.kind is REPLACE:
            self.group_writes += 1
            self._unindex(k.id)
        self.objects[k.id] = obj
        self._index(k.id, obj)
        return True

    @property
    def has_garbage(self) -> bool:
        return bool(self._garbage(False))
