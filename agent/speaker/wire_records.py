"""Decoded UPDATEs as compact records: the relay decodes, the agent only rebuilds the events.

DOC: in raw-UPDATE mode the API helper (`agent.speaker.relay`, its own process) decodes every
``raw-update PEER CAPS HEX`` line with the agent's UPDATE decoder (`agent.speaker.wire`) and
writes ``wire-events PEER DATA`` in its place: DATA is the base64 of a `marshal` dump of the
events' records, built of plain tuples, ints, strings and bytes only. The agent
(`agent.speaker.codec.Decoder`) turns DATA back into the very events `WireDecoder.decode` gave
(`events_of`), with a few C-level calls per UPDATE and none per prefix in Python. Why: decoding is
about half of the agent's main-thread work for a table of distinct attribute sets (~35 µs per
UPDATE of an Internet-like table), and on a 2-core machine the relay's process has a core to
spare while the agent's core is busy; `marshal.loads` of a record costs ~1-2 µs.

Records (one tuple per event, a list per UPDATE):

* ``(0, FAM)``: `EndOfRib` (FAM 4 or 6);
* ``(1, ACTION, REASON, CODE, SUBCODE, FAM|0, DATA)``: `UpdateError`;
* ``(2, FAM, RUNS, WITHDRAWN, PATH_IDS, WITHDRAWN_PATH_IDS)``: `RouteUpdate`; RUNS are
  ``(ATTRS, NEXT_HOP, LINK_LOCAL, PREFIXES)`` for successive `Announced` sharing attributes and
  next hops, ATTRS the `PathAttrs` fields with the origin as its number; prefixes are the packed
  ints of `agent.core.model.Prefix`.

Sharing, as the in-process decoder has it: equal attribute sets are one `PathAttrs` (a bounded
interning table by the record's tuple), and within a new set the AS numbers, AS paths, community
texts and next hops are the objects already held when equal (bounded tables: memory per route of
a full table). A record that does not have this shape raises `RecordError` (the relay and the
agent run the same interpreter and code; marshal data comes only from the agent's own relay over
its private socket, never from a peer).
"""

from __future__ import annotations

import marshal
from itertools import repeat
from operator import itemgetter

from ..core.bgp import Announced, EndOfRib, Event, Family, PathAttrs, RouteUpdate, UpdateAction, UpdateError
from ..core.model import BgpOrigin, Prefix
from .wire_values import frozen_builder

V4, V6 = Family.IPV4_UNICAST, Family.IPV6_UNICAST
_FAM_CODE = {V4: 4, V6: 6}
_FAM = {4: V4, 6: V6}
_ORIGINS = (BgpOrigin.IGP, BgpOrigin.EGP, BgpOrigin.INCOMPLETE)
_new_int = int.__new__
_new_tuple = tuple.__new__
_new_route_update = frozen_builder(RouteUpdate)
# entries of the sharing tables (each cleared when full): attribute sets as the in-process decoder
# holds them, AS numbers as many as a full table has (~80k), other values
ATTRS_SIZE, ASNS_SIZE, VALUES_SIZE = 4096, 1 << 18, 1 << 15


class RecordError(ValueError):
    """DATA of a ``wire-events`` line is not a record list of this module."""


_head = itemgetter(1, 2, 3)
_prefix = itemgetter(0)


def _runs(announced: tuple) -> list:
    if len(set(map(_head, announced))) == 1:  # the usual case: one next hop, one attribute set
        first = announced[0]
        attrs = first.attrs
        return [((int(attrs[0]), *attrs[1:]), first.next_hop, first.link_local, tuple(map(int, map(_prefix, announced))))]
    runs: list = []
    last = None
    for a in announced:
        head = (a.attrs, a.next_hop, a.link_local)
        if head != last:
            attrs = a.attrs
            runs.append([(int(attrs[0]), *attrs[1:]), a.next_hop, a.link_local, []])
            last = head
        runs[-1][3].append(int(a.prefix))
    return [(*r[:3], tuple(r[3])) for r in runs]


def records(events: tuple[Event, ...]) -> list:
    """The records of `events` (as `WireDecoder.decode` gives them: `RouteUpdate`, `EndOfRib`,
    `UpdateError`); raises TypeError for another kind."""
    out = []
    for e in events:
        cls = e.__class__
        if cls is RouteUpdate:
            out.append((2, _FAM_CODE[e.family], _runs(e.announced) if e.announced else (),
                        tuple(map(int, e.withdrawn)), e.path_ids, e.withdrawn_path_ids))
        elif cls is EndOfRib:
            out.append((0, _FAM_CODE[e.family]))
        elif cls is UpdateError:
            out.append((1, e.action.value, e.reason, e.code, e.subcode,
                        _FAM_CODE[e.family] if e.family is not None else 0, bytes(e.data)))
        else:
            raise TypeError(f"no record for {cls.__name__}")
    return out


def dumps(events: tuple[Event, ...]) -> bytes:
    """`records(events)` as one marshal dump."""
    return marshal.dumps(records(events))


class Rebuilder:
    """Events from records (`events_of`), with the bounded sharing tables of the module DOC."""

    def __init__(self) -> None:
        self._attrs: dict[tuple, PathAttrs] = {}  # keyed by the PathAttrs itself (equal to its record)
        self._asns: dict[int, int] = {}
        self._values: dict = {}  # AS paths, community texts, next hops: value -> itself

    def events_of(self, peer: str, data: bytes) -> tuple[Event, ...]:
        try:
            records = marshal.loads(data)
            if len(records) == 1:
                return (self._event(peer, records[0]),)
            return tuple([self._event(peer, r) for r in records])
        except RecordError:
            raise
        except (ValueError, TypeError, IndexError, KeyError, EOFError) as exc:
            raise RecordError(f"not an event record: {exc!r}") from exc

    def _event(self, peer: str, r: tuple) -> Event:
        kind = r[0]
        if kind == 2:
            _, fam, runs, withdrawn, ids, wd_ids = r
            announced: tuple = ()
            share = self._values.setdefault
            for plain, nh, ll, prefixes in runs:
                attrs = self._attrs.get(plain)
                if attrs is None:
                    attrs = self._new_attrs(plain)
                if nh is not None:
                    nh = share(nh, nh)
                if ll is not None:
                    ll = share(ll, ll)
                found = map(_new_int, repeat(Prefix), prefixes)
                announced += tuple(map(_new_tuple, repeat(Announced), zip(found, repeat(nh), repeat(attrs), repeat(ll))))
            return _new_route_update(peer, _FAM[fam], announced,
                                     tuple(map(_new_int, repeat(Prefix), withdrawn)) if withdrawn else (), ids, wd_ids)
        if kind == 0:
            return EndOfRib(peer, _FAM[r[1]])
        if kind == 1:
            _, action, reason, code, subcode, fam, data = r
            return UpdateError(peer, UpdateAction(action), reason, code, subcode, _FAM[fam] if fam else None, data)
        raise RecordError(f"unknown record kind {kind!r}")

    def _new_attrs(self, plain: tuple) -> PathAttrs:
        """A `PathAttrs` of a set not seen (recently), its values shared with those held."""
        if len(plain) != len(PathAttrs._fields):
            raise RecordError(f"attribute record of {len(plain)} fields")
        values, asns = self._values, self._asns
        if len(values) >= VALUES_SIZE:
            values.clear()
        if len(asns) >= ASNS_SIZE:
            asns.clear()
        if len(self._attrs) >= ATTRS_SIZE:
            self._attrs.clear()
        share = values.setdefault
        origin, path, as_set, med, local_pref, comms, large, ext, atomic, originator, cluster, confed = plain
        if path:
            held = values.get(path)
            if held is None:
                get = asns.setdefault
                held = tuple(map(get, path, path))
                values[held] = held
            path = held
        if comms:
            comms = tuple(map(share, comms, comms))
        if large:
            large = tuple(map(share, large, large))
        attrs = _new_tuple(PathAttrs, (
            _ORIGINS[origin], path, as_set, med, local_pref, comms, large, ext, atomic, originator, cluster, confed))
        self._attrs[attrs] = attrs
        return attrs
