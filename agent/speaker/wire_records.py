"""Decoded UPDATEs as compact records: the relay decodes, the agent only rebuilds the events.

DOC: in raw-UPDATE mode the API helper (`agent.speaker.relay`, its own process) decodes every
``raw-update PEER CAPS HEX`` line with the agent's UPDATE decoder (`agent.speaker.wire`) and
writes ``wire-events PEER K DATA`` in its place: DATA is a `marshal` dump of the events' records
(`RecordWriter.records`, one dump per line), built of plain tuples, ints, strings and bytes only,
sent as it is with the K newline octets it holds (the agent's line reader keeps them in the line:
`agent.speaker.lines`). Base64 made the line a third longer, and decoding it was 5.7 % of the
agent's instructions per route at a full table (CPython's decoder takes ~27 per character);
escaping the newlines instead (``0xff`` pairs) still cost the agent 3-4 % of its main thread in
the two ``bytes.replace`` of two-octet patterns that undid it.
The relay's decoder is `RecordDecoder`: the same decoder, which makes the records of the common
UPDATE (IPv4 prefixes of one good attribute set) directly, without the events in between (~12 %
of the relay's work per UPDATE of an Internet-like table); every other UPDATE goes through the
events and `RecordWriter.records`, and tests/test_wire_records.py holds both to the same records.
The agent (`agent.speaker.codec.Decoder`) turns DATA back into the events
`WireDecoder.decode` gave (`Rebuilder.events_of`), with a few C-level calls per UPDATE and no
Python step per prefix: equal events, except that the prefixes of runs stay the plain ints
marshal loads (a tuple per run as loaded; no `Prefix` object per route anywhere in the agent's
tables, see `agent.core.model`). Why: decoding is about half of the agent's main-thread work for a table
of distinct attribute sets (~35 µs per UPDATE of an Internet-like table), and on a 2-core
machine the relay's process has a core to spare while the agent's core is busy.

Records (one tuple per event, a list per line):

* ``(0, FAM)``: `EndOfRib` (FAM 4 or 6);
* ``(1, ACTION, REASON, CODE, SUBCODE, FAM|0, DATA)``: `UpdateError`;
* ``(2, FAM, RUNS, WITHDRAWN, PATH_IDS, WITHDRAWN_PATH_IDS)``: `RouteUpdate`; RUNS are
  ``(ATTRS, NEXT_HOP, LINK_LOCAL, PREFIXES)`` for successive `Announced` sharing attributes and
  next hops; prefixes are the packed ints of `agent.core.model.Prefix`;
* ``(3, ATTRS, NEXT_HOP, PREFIX)``: the `RouteUpdate` of one IPv4 prefix announced alone (no
  withdrawal, no path id), two thirds of an Internet-like table's UPDATEs: one flat tuple to
  dump, load and take apart instead of four nested ones.

* ``(4, FAM, MESSAGES, NEW, NUMBERS, NEXT_HOPS, LINK_LOCALS, PREFIXES)``: the records of
  MESSAGES successive UPDATEs of family FAM that only announce (kind 3, and kind 2 without
  withdrawals or path ids), by column (`columns`, the relay's last step before the dump): the
  runs' attribute set numbers, next hops, link-local next hops and prefix tuples, and NEW the
  fields of the sets first written among them, in order. The rebuilder makes its runs with a few
  C-level calls (`zip` and `map` over the columns) instead of a Python step per UPDATE.

The successive records of a line that only announce, in one family (kind 3, kind 4, and kind 2
without withdrawals or path ids), become one event (`AnnouncedRuns` with the runs of all of
them), so the BGP source and the import stage are entered once for them instead of once per
UPDATE (their processing, run by run, is the same); `Rebuilder.messages` is how many UPDATEs the
line held.

Attribute sets by number: the writer numbers every attribute set (`PathAttrs` object, which the
decoder interns) the first time it writes it and then writes only the number; ATTRS is
``(NUMBER, ORIGIN, AS_PATH, ...)`` (the `PathAttrs` fields, the origin as its number) the first
time and NUMBER after. When its table is full (`ATTRS_SIZE`) the writer forgets it and numbers
from 0 again, writing the fields on each number's first use, so the rebuilder's table (number ->
`PathAttrs`) is bounded by the same size and never needs a message of its own; a new relay
(ExaBGP restarted) starts empty the same way. A record that could not be written
(`RecordWriter.reset`) makes the writer forget its numbers too, so no number is used that the
rebuilder never saw.

Communities travel as their packed octets (`agent.core.communities`: ``raw``, or ``()`` when
absent) and are rebuilt as `Communities` / `LargeCommunities`.
Sharing: next hops and community lists are the objects held when equal (bounded tables: memory
per route of a full table); AS paths are not (a candidate keeps its path packed,
`agent.core.candidate.pack_path`, so the tuple is let go with its set). A record that does not
have this shape, or a number the rebuilder does not hold, raises `RecordError` (the relay and the agent run the same interpreter
and code; marshal data comes only from the agent's own relay over its private socket, never from
a peer).
"""

from __future__ import annotations

import marshal
from itertools import repeat
from operator import itemgetter

from ..core.bgp import Announced, AnnouncedRuns, EndOfRib, Event, Family, PathAttrs, RouteUpdate, UpdateAction, UpdateError
from ..core.communities import Communities, LargeCommunities
from ..core.model import BgpOrigin, Prefix
from .wire import WireDecoder
from .wire_values import frozen_builder

V4, V6 = Family.IPV4_UNICAST, Family.IPV6_UNICAST
_FAM_CODE = {V4: 4, V6: 6}
_FAM = {4: V4, 6: V6}
_ORIGINS = (BgpOrigin.IGP, BgpOrigin.EGP, BgpOrigin.INCOMPLETE)
_new_int = int.__new__
_new_tuple = tuple.__new__
_new_route_update = frozen_builder(RouteUpdate)
_new_bytes = bytes.__new__
_LARGE = "large"  # (a large community list's key in the shared values: its octets alone may be a standard one's)
# numbered attribute sets (the writer's table, so the rebuilder's too): as many as the decoder
# interns, since only those objects come again; the rebuilder's table of AS paths and next hops
# (cleared when full; community lists too; AS numbers: the decoder's own table, `wire_values`)
ATTRS_SIZE, VALUES_SIZE = WireDecoder.CACHE_SIZE, 1 << 15


class RecordError(ValueError):
    """DATA of a ``wire-events`` line is not a record list of this module."""


_attrs_of = itemgetter(2)
_hops_of = itemgetter(1, 3)
_prefix_of = itemgetter(0)


def columns(records: list) -> list:
    """`records` with every stretch of two or more successive records of one family that only
    announce as one kind-4 record (see the module DOC); the other records as they are, in order.
    Where a set's fields come again under a number the stretch used already (the writer's table
    was full and it numbered from 0 again), a new kind-4 record begins, even inside an UPDATE's
    runs (that record counts no UPDATE of its own): the rebuilder makes a record's new sets
    before its runs."""
    out: list = []
    cur: list | None = None  # [family, UPDATEs, new, numbers, hops, link-locals, prefixes, seen, records]
    for r in records:
        if r[0] == 3:  # (the common record: `_announcing` and `_runs_of` inline)
            f, runs = 4, ((r[1], r[2], None, (r[3],)),)
        else:
            f = _announcing(r)
            runs = _runs_of(r) if f else ()
        if cur is not None and cur[0] != f:
            out += _column(cur)
            cur = None
        if not f:
            out.append(r)
            continue
        if cur is None:
            cur = [f, 0, [], [], [], [], [], set(), []]
        cur[1] += 1
        cur[8].append(r)
        for ref, nh, ll, pfx in runs:
            if ref.__class__ is int:
                number = ref
            else:
                number = ref[0]
                if number in cur[7]:
                    out += _column(cur, split=True)
                    cur = [f, 0, [], [], [], [], [], set(), []]
                cur[2].append(ref)
            cur[7].add(number)
            cur[3].append(number)
            cur[4].append(nh)
            cur[5].append(ll)
            cur[6].append(pfx)
    if cur is not None:
        out += _column(cur)
    return out


def _column(cur: list, split: bool = False) -> list:
    """The kind-4 record of a stretch (`columns`), or its one record as it was when the stretch
    is exactly that record with all its runs (not cut by a number written again: `split`, where
    the record counted is the one being cut, whose runs are not all in the stretch yet)."""
    fam, count, new, numbers, hops, lls, prefixes, _seen, originals = cur
    if count == 1 and len(originals) == 1 and not split and len(numbers) == len(_runs_of(originals[0])):
        return originals
    return [(4, fam, count, tuple(new), tuple(numbers), tuple(hops), tuple(lls), tuple(prefixes))]


def _runs_of(r: tuple) -> tuple:
    return ((r[1], r[2], None, (r[3],)),) if r[0] == 3 else r[2]


def _announcing(r: tuple) -> int:
    """The family of a kind-3 or kind-2 record that only announces (no withdrawals, no path
    ids), else 0."""
    kind = r[0]
    return 4 if kind == 3 else (r[1] if kind == 2 and r[2] and not r[3] and r[4] is None else 0)


class RecordWriter:
    """Records of decoded events, attribute sets by number (see the module DOC)."""

    def __init__(self) -> None:
        self._numbers: dict[int, tuple[int, PathAttrs]] = {}  # id(PathAttrs) -> (number, the object)

    def reset(self) -> None:
        """Forget the numbers (records written since the last use may not reach the rebuilder)."""
        self._numbers.clear()

    def _ref(self, attrs: PathAttrs):
        known = self._numbers.get(id(attrs))
        if known is not None:
            return known[0]
        if len(self._numbers) >= ATTRS_SIZE:
            self._numbers.clear()
        number = len(self._numbers)
        self._numbers[id(attrs)] = (number, attrs)
        origin, path, as_set, med, local_pref, comms, large, ext, atomic, originator, cluster, confed = attrs
        return (number, int(origin), path, as_set, med, local_pref,
                comms if comms.__class__ is tuple else bytes(comms),  # (`octets`, inline)
                large if large.__class__ is tuple else bytes(large), ext, atomic, originator, cluster, confed)

    def _runs(self, announced: tuple) -> list:
        first = announced[0]
        if len(announced) == 1:
            return [(self._ref(first[2]), first[1], first[3], (int(first[0]),))]
        if len(set(map(id, map(_attrs_of, announced)))) == 1 and len(set(map(_hops_of, announced))) == 1:
            return [(self._ref(first[2]), first[1], first[3], tuple(map(int, map(_prefix_of, announced))))]
        runs: list = []
        last = None
        for a in announced:
            head = (id(a.attrs), a.next_hop, a.link_local)
            if head != last:
                runs.append([self._ref(a.attrs), a.next_hop, a.link_local, []])
                last = head
            runs[-1][3].append(int(a.prefix))
        return [(*r[:3], tuple(r[3])) for r in runs]

    def records(self, events: tuple[Event, ...]) -> list:
        """The records of `events` (as `WireDecoder.decode` gives them: `RouteUpdate`, `EndOfRib`,
        `UpdateError`); raises TypeError for another kind (then call `reset`)."""
        out = []
        for e in events:
            cls = e.__class__
            if cls is RouteUpdate:
                announced = e.announced
                if len(announced) == 1 and e.family is V4 and not e.withdrawn and e.path_ids is None \
                        and e.withdrawn_path_ids is None:
                    a = announced[0]
                    out.append((3, self._ref(a.attrs), a.next_hop, int(a.prefix)))
                    continue
                out.append((2, _FAM_CODE[e.family], self._runs(announced) if announced else (),
                            tuple(map(int, e.withdrawn)), e.path_ids, e.withdrawn_path_ids))
            elif cls is EndOfRib:
                out.append((0, _FAM_CODE[e.family]))
            elif cls is UpdateError:
                out.append((1, e.action.value, e.reason, e.code, e.subcode,
                            _FAM_CODE[e.family] if e.family is not None else 0, bytes(e.data)))
            else:
                raise TypeError(f"no record for {cls.__name__}")
        return out


class RecordDecoder(WireDecoder):
    """The relay's decoder: `records_of` gives the records `RecordWriter.records` would make of
    `WireDecoder.decode`'s events, and for the common UPDATE (IPv4 prefixes of one good attribute
    set, nothing else) makes them directly: no `Prefix`, `Announced` or `RouteUpdate` to build
    and take apart again. Its attribute sets are numbered by its own `writer`."""

    def __init__(self) -> None:
        super().__init__()
        self.writer = RecordWriter()

    def records_of(self, caps: int, body: bytes) -> list:
        """The records of UPDATE `body` (TypeError as `RecordWriter.records`: then call `reset`)."""
        try:
            out = self._decode("", caps, body)  # (`decode` without its call: the common case)
        except Exception:
            out = self.decode("", caps, body)  # (its answer to a bug of ours)
        return out if out.__class__ is list else self.writer.records(out)

    def reset(self) -> None:
        self.writer.reset()

    def _one4(self, peer: str, value: int, nh: str | None, attrs: PathAttrs) -> list:  # type: ignore[override]
        return [(3, self.writer._ref(attrs), nh, value)]

    def _many4(self, peer: str, found: list, nh: str | None, attrs: PathAttrs) -> list:  # type: ignore[override]
        return [(2, 4, [(self.writer._ref(attrs), nh, None, tuple(map(int, found)))], (), None, None)]


class Rebuilder:
    """Events from records (`events_of`), with the bounded tables of the module DOC."""

    def __init__(self) -> None:
        self._attrs: dict[int, PathAttrs] = {}  # number -> attribute set
        self._values: dict = {}  # AS paths, next hops: value -> itself
        self.messages = 0  # the records (UPDATEs, per family) of the last `events_of`

    def release(self) -> None:
        """Let the sharing memo go (a load is over: it only shares values between the UPDATEs of
        one burst); the numbered attribute sets stay, the relay refers to them."""
        self._values = {}

    def events_of(self, peer: str, data: bytes) -> tuple[Event, ...]:
        """The events of one line's records. Successive records of UPDATEs of one family that
        only announce (kind 3, kind 4, and kind 2 with runs and no withdrawal or path id) are one event
        (`AnnouncedRuns` of all their runs, `messages` of them): the BGP source and the import
        stage take it in one call. A lone one is the event of its UPDATE."""
        try:
            records = marshal.loads(data)
            self.messages = len(records) + sum([r[2] - 1 for r in records if r[0] == 4])
            if len(records) == 1:
                return (self._event(peer, records[0]),)
            out: list[Event] = []
            held: list = []  # the successive records of one family that only announce
            fam = 0
            for r in records:
                f = r[1] if r[0] == 4 else _announcing(r)
                if f != fam and held:
                    out.append(self._event(peer, held[0]) if len(held) == 1 else self._merged(peer, fam, held))
                    held = []
                fam = f
                if f:
                    held.append(r)
                else:
                    out.append(self._event(peer, r))
            if held:
                out.append(self._event(peer, held[0]) if len(held) == 1 else self._merged(peer, fam, held))
            return tuple(out)
        except RecordError:
            raise
        except (ValueError, TypeError, IndexError, KeyError, EOFError) as exc:
            raise RecordError(f"not an event record: {exc!r}") from exc

    def _merged(self, peer: str, fam: int, records: list) -> RouteUpdate:
        """One event of the runs of `records` (see `events_of`)."""
        runs: list = []
        messages = len(records)
        attrs_of, share = self._attrs, self._values.setdefault
        for r in records:
            kind = r[0]
            if kind == 4:  # by column: no Python step per run
                _, _fam, count, new, numbers, hops, lls, prefixes = r
                messages += count - 1
                if new:
                    self._new_sets(new)
                runs += zip(prefixes, map(share, hops, hops), map(attrs_of.__getitem__, numbers), map(share, lls, lls))
            elif kind == 3:
                _, ref, nh, value = r
                attrs = attrs_of[ref] if ref.__class__ is int else self._new_attrs(ref)
                runs.append(((value,), nh if nh is None else share(nh, nh), attrs, None))
            else:
                runs += [self._run(*run) for run in r[2]]
        return _new_route_update(peer, _FAM[fam], AnnouncedRuns(tuple(runs), messages), (), None, None)

    def _event(self, peer: str, r: tuple) -> Event:
        kind = r[0]
        if kind == 4:
            return self._merged(peer, r[1], [r])
        if kind == 3:
            _, ref, nh, value = r
            attrs, nh, _ = self._shared(ref, nh, None)
            return _new_route_update(peer, V4, (_new_tuple(Announced, (_new_int(Prefix, value), nh, attrs, None)),),
                                     (), None, None)
        if kind == 2:
            _, fam, runs, withdrawn, ids, wd_ids = r
            if len(runs) == 1 and len(runs[0][3]) == 1:  # one prefix: its `Announced` (no runs to keep)
                ref, nh, ll, prefixes = runs[0]
                attrs, nh, ll = self._shared(ref, nh, ll)
                announced = (_new_tuple(Announced, (_new_int(Prefix, prefixes[0]), nh, attrs, ll)),)
            else:
                announced = AnnouncedRuns(tuple([self._run(*run) for run in runs])) if runs else ()
            return _new_route_update(peer, _FAM[fam], announced,
                                     tuple(map(_new_int, repeat(Prefix), withdrawn)) if withdrawn else (), ids, wd_ids)
        if kind == 0:
            return EndOfRib(peer, _FAM[r[1]])
        if kind == 1:
            _, action, reason, code, subcode, fam, data = r
            return UpdateError(peer, UpdateAction(action), reason, code, subcode, _FAM[fam] if fam else None, data)
        raise RecordError(f"unknown record kind {kind!r}")

    def _run(self, ref, nh: str | None, ll: str | None, prefixes: tuple) -> tuple:
        """One run as `AnnouncedRuns` keeps it, ``(prefixes, next_hop, attrs, link_local)``: the
        prefixes as loaded, plain ints, no step per prefix (the BGP source takes the run as one
        batch)."""
        attrs, nh, ll = self._shared(ref, nh, ll)
        return prefixes, nh, attrs, ll

    def _shared(self, ref, nh: str | None, ll: str | None) -> tuple:
        """A run's attributes (by number, or written in full) and next hops, as the objects held."""
        attrs = self._attrs[ref] if ref.__class__ is int else self._new_attrs(ref)
        share = self._values.setdefault
        return attrs, (nh if nh is None else share(nh, nh)), (ll if ll is None else share(ll, ll))

    def _new_attrs(self, fields: tuple) -> PathAttrs:
        """The `PathAttrs` of a numbered set written in full, its values shared with those held."""
        return self._new_sets((fields,))

    def _new_sets(self, new: tuple) -> PathAttrs:
        """`_new_attrs` for each of `new`, in order (one call for a record's new sets: a call per
        set was ~2 % of the agent's work at the full table); returns the last one."""
        values, attrs_of = self._values, self._attrs
        size = len(PathAttrs._fields) + 1
        for fields in new:
            if len(fields) != size:
                raise RecordError(f"attribute record of {len(fields)} fields")
            if len(values) >= VALUES_SIZE:
                values.clear()
            (number, origin, path, as_set, med, local_pref, comms, large, ext, atomic, originator, cluster,
             confed) = fields
            # (the two lists inline, not through one helper: a call per set was 4 % of this rebuild)
            if comms:
                if comms.__class__ is not bytes or len(comms) & 3:
                    raise RecordError("Communities not packed octets")
                held = values.get(comms)
                if held is None:
                    held = values[comms] = _new_bytes(Communities, comms)  # (`Communities.packed`, inline)
                comms = held
            if large:
                if large.__class__ is not bytes or len(large) % 12:
                    raise RecordError("LargeCommunities not packed octets")
                key = (_LARGE, large)
                held = values.get(key)
                if held is None:
                    held = values[key] = _new_bytes(LargeCommunities, large)
                large = held
            attrs = attrs_of[number] = _new_tuple(PathAttrs, (_ORIGINS[origin], path, as_set, med, local_pref, comms,
                                                              large, ext, atomic, originator, cluster, confed))
        return attrs
