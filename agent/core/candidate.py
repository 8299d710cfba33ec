"""Candidates: one origin's offer for one prefix, and the BGP attributes best-path reads.

DOC: a candidate is built per distinct received attribute set (480k of them in a full table,
shared by the prefixes of their UPDATEs), so its size is most of the RIB's memory per route
after the dict slots. It is a named tuple (built several times faster than a frozen dataclass),
in one of two shapes:

* `Candidate`: ``(origin, distance, nexthops, form, bgp)``, with ``bgp`` None: static, kernel
  and connected routes. ``form`` holds the three values that are nearly always the same: the
  route type, the kernel metric policy asks for, the ADD-PATH path id; None for a unicast route
  at the FIB's default metric without a path id, else a shared `Form` (`form`). ``c.type``,
  ``c.metric`` and ``c.path_id`` read it; the constructor and ``_replace`` take them by name.
* `BgpCandidate` (a subclass, built by ``Candidate(..., bgp=attrs)`` or directly): the BGP path
  attributes are fields of the candidate itself, after the common ones, and the four values that
  are the same for every path of a peer session (address, AS, router id, eBGP) are one shared
  `PeerIdentity` in the place of ``bgp``. One 10-item tuple (128 octets with the collector's
  header and the spare item a tuple subclass is allocated with) instead of a candidate and a
  separate `BgpAttrs` (104 + 128): the full table's candidates take 41 bytes per route less
  (type, metric and path id as three fields took 144 octets: 6.4 bytes per route more). The
  best-path steps read the fields directly
  (``c.local_pref``, ``c.bgp_origin``, ``c.med``, ``c.neighbor_as`` ...; ``c.is_bgp`` tells the
  shapes apart without building anything). ``c.bgp`` still gives the attributes as a `BgpAttrs`
  (built on each read: for views, tests and other cold code). The BGP ORIGIN attribute is
  ``bgp_origin`` on the candidate, because ``origin`` is the candidate's source (`Origin`) in both
  shapes.

The AS path and the two community lists are one `bytes` (``path``): the path's 4-octet AS numbers,
then the communities' octets, then the large communities' (`pack_attrs`); ``marks`` says where
they are: where the communities start, plus the large communities' length shifted by `MARK_SHIFT`
(a set without large communities, 88 % of a full table, has a small int that Python shares; the
others share theirs through `_MARKS`). One object per attribute set instead of up to three (~13
bytes per route less at the full table), and one field instead of two (a tuple subclass is
allocated with one spare item: 13 fields took 160 octets, 12 take 144, ~5 bytes per route less);
``c.as_path``, ``c.communities``, ``c.large_communities``, ``c.path_length`` (and ``c.comms``,
``c.large``: the offsets) read them back. Lists of texts (the JSON path, a policy's added
communities) stay tuples: ``marks`` is then the pair of them, and ``path`` the AS path alone.

Equality and hashing are the tuple's: two BGP candidates are equal when every field is; a
candidate of one shape never equals one of the other.
"""

from __future__ import annotations

import struct
from collections import namedtuple
from operator import attrgetter
from typing import Any, NamedTuple

from .communities import Communities, LargeCommunities, octets
from .values import BgpOrigin, Form, NextHop, Origin, RouteType, form, shared


class BgpAttrs(NamedTuple):
    """Path attributes that the best-path steps read, as one value (a `BgpCandidate` holds them
    as its own fields: this is the form policy tests, views and the JSON path exchange; `_replace`
    gives a changed copy)."""

    peer_address: str
    peer_as: int
    router_id: str
    ebgp: bool
    local_pref: int = 100
    as_path: tuple[int, ...] = ()
    origin: BgpOrigin = BgpOrigin.IGP
    med: int = 0
    communities: tuple[str, ...] = ()
    large_communities: tuple[str, ...] = ()

    @property
    def neighbor_as(self) -> int:
        """The AS the path was learned from (first AS in the path, else the peer's AS)."""
        return self.as_path[0] if self.as_path else self.peer_as


class PeerIdentity(NamedTuple):
    """Who a BGP path came from: the same for every path of one peer session (one shared object,
    `peer_identity`)."""

    address: str
    asn: int
    router_id: str
    ebgp: bool


_identities: dict[PeerIdentity, PeerIdentity] = {}


def peer_identity(address: str, asn: int, router_id: str, ebgp: bool) -> PeerIdentity:
    """The shared `PeerIdentity` with these values (a few per peer over the agent's life)."""
    return shared(_identities, PeerIdentity(address, asn, router_id, ebgp))


_UNICAST = RouteType.UNICAST


class _CandidateFields(NamedTuple):
    origin: Origin
    distance: int
    nexthops: tuple[NextHop, ...] = ()
    form: Form | None = None  # type, metric, path id (`Form`; None: unicast, default metric, no path id)
    bgp: BgpAttrs | None = None


LOGICAL = ("origin", "distance", "nexthops", "type", "bgp", "metric", "path_id")
_FORM_NAMES = ("type", "metric", "path_id")


def _with_form(values: list, changes: dict) -> None:
    """Move the changes of `type`, `metric` and `path_id` in `changes` into ``values[3]``."""
    if any(name in changes for name in _FORM_NAMES):
        f = values[3] or _PLAIN
        values[3] = form(*(changes.pop(name, f[i]) for i, name in enumerate(_FORM_NAMES)))


def _with_bgp(values: list, bgp: Any, changes: dict) -> Candidate:
    """The candidate of `values`' common fields with the attributes `bgp` (None: a plain one)."""
    f = values[3] or _PLAIN
    return Candidate(*values[:3], f.type, bgp, f.metric, f.path_id)._replace(**changes)


class Candidate(_CandidateFields):
    """One origin's route for one prefix. A BGP peer with ADD-PATH (RFC 7911) offers several
    routes for one prefix: each is its own candidate, told apart by `path_id` (the RIB keys a
    candidate by origin and path id; None: the peer sends one path per prefix). Given `bgp`
    attributes, the constructor builds a `BgpCandidate` (see the module doc). ``type``,
    ``metric`` and ``path_id`` are read from ``form`` (hot paths test ``c[3] is None``)."""

    __slots__ = ()
    is_bgp = False

    def __new__(cls, origin: Origin, distance: int, nexthops: tuple[NextHop, ...] = (),
                type: RouteType = RouteType.UNICAST, bgp: Any = None, metric: int | None = None,
                path_id: int | None = None) -> Candidate:
        if bgp is None:
            return tuple.__new__(cls, (origin, distance, nexthops, form(type, metric, path_id), None))
        return bgp_candidate(origin, distance, nexthops, type, bgp, metric, path_id)

    @property
    def type(self) -> RouteType:
        f = self[3]
        return _UNICAST if f is None else f[0]

    @property
    def metric(self) -> int | None:
        f = self[3]
        return None if f is None else f[1]

    @property
    def path_id(self) -> int | None:
        f = self[3]
        return None if f is None else f[2]

    def __getnewargs__(self) -> tuple:
        return tuple(self)

    @classmethod
    def _make(cls, iterable: Any) -> Candidate:
        return tuple.__new__(cls, iterable)

    def _replace(self, **changes: Any) -> Candidate:
        values = list(self)
        _with_form(values, changes)
        if changes.get("bgp") is not None:
            return _with_bgp(values, changes.pop("bgp"), changes)
        for name, value in changes.items():
            if name not in self._fields:
                raise ValueError(f"got unexpected field name: {name!r}")
            values[self._fields.index(name)] = value
        return tuple.__new__(Candidate, values)

    def _asdict(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in LOGICAL}

    def __repr__(self) -> str:
        return "Candidate(" + ", ".join(f"{n}={v!r}" for n, v in self._asdict().items()) + ")"

    def describe(self) -> str:
        if self.type != RouteType.UNICAST:
            return self.type.name.lower()
        return ", ".join(str(nh) for nh in self.nexthops) or "-"


_PLAIN = Form()


BGP_FIELDS = ("origin", "distance", "nexthops", "form", "peer", "local_pref", "path", "bgp_origin", "med",
              "marks")
MARK_SHIFT = 20  # ``marks``: communities' start + (large communities' length << MARK_SHIFT)
_START = (1 << MARK_SHIFT) - 1
_Layout = namedtuple("_Layout", BGP_FIELDS)  # (its C field readers serve `BgpCandidate`)
_INDEX = {name: i for i, name in enumerate(BGP_FIELDS)}
_UNSET = object()
_STRUCTS: dict[int, struct.Struct] = {}


def _struct(count: int) -> struct.Struct:
    s = _STRUCTS.get(count)
    if s is None:
        s = _STRUCTS[count] = struct.Struct(f">{count}I")
    return s


def pack_path(path: Any) -> bytes:
    """An AS path (AS numbers in order) as its packed 4-octet values (as is if already packed)."""
    if path.__class__ is bytes:
        return path
    n = len(path)
    return PATH_PACKERS[n](*path) if n < 64 else _struct(n).pack(*path)


# the packers of paths of 0-63 AS numbers, by length (a tuple index: no call to find them)
PATH_PACKERS = tuple(_struct(n).pack for n in range(64))


def path_asns(packed: bytes) -> tuple[int, ...]:
    """The AS numbers of a packed AS path."""
    return _struct(len(packed) >> 2).unpack(packed) if packed else ()


def keep_communities(values: Any) -> Any:
    """A community list as `pack_attrs` takes it: `communities.octets` (the octets of a packed
    list, a tuple of texts as given: the JSON path, tests), any other sequence of texts as a
    tuple."""
    return octets(values) if isinstance(values, (tuple, bytes)) else tuple(values)


def pack_attrs(path: bytes, comms: Any, large: Any) -> tuple[bytes, Any]:
    """The ``path`` and ``marks`` fields of a `BgpCandidate` for a packed AS path (`pack_path`)
    and its two community lists (octets or ``()``; `keep_communities`): the lists' octets follow
    the path's in one `bytes`, and ``marks`` is where the communities start plus the large
    communities' length shifted by `MARK_SHIFT` (module doc). A list of texts (the JSON path, a
    policy's added communities) keeps both lists as a pair of tuples of texts in ``marks``, and
    ``path`` the AS path alone."""
    if (comms.__class__ is tuple and comms) or (large.__class__ is tuple and large):
        return path, (_texts(comms, Communities), _texts(large, LargeCommunities))
    n = len(path)
    if large:  # (marks beyond Python's small ints: one object per value, from `_MARKS`)
        marks = n + (_octets_len(large) << MARK_SHIFT)
        if len(_MARKS) > 4096:
            _MARKS.clear()
        return b"".join((path, comms or b"", large)), _MARKS.setdefault(marks, marks)
    if comms:  # (a join: bytes + a `Communities` would ask the subclass's __radd__ first)
        return b"".join((path, comms)), n
    return path, n


_octets_len = bytes.__len__  # (a `Communities`' own len counts its values)
# the marks of sets with large communities, shared: a few hundred values in a full table (where
# the communities start, the large ones' length), 57k sets; an int each would be 1.8 MB at x1
_MARKS: dict[int, int] = {}


def _texts(values: Any, cls: type[Communities]) -> tuple:
    return values if values.__class__ is tuple else tuple(cls.packed(values))


_FIRST = _struct(1)
_READ_AS = ("as_path", "communities", "large_communities")  # `_replace` takes these for the two below
_PACKED = (6, 9)  # the fields `pack_attrs` makes together


class BgpCandidate(Candidate):
    """A BGP peer's candidate: the common fields, then the path attributes (module doc). Build
    it with ``Candidate(..., bgp=attrs)``, or as ``tuple.__new__(BgpCandidate, (...))`` in
    `BGP_FIELDS` order on hot paths."""

    __slots__ = ()
    is_bgp = True
    _fields = BGP_FIELDS
    peer = _Layout.peer  # the shared `PeerIdentity`
    local_pref = _Layout.local_pref
    # the AS path packed (`pack_path`), then the octets of the communities and of the large
    # communities (`pack_attrs`): `as_path`, `communities` and `large_communities` read them
    path = _Layout.path
    bgp_origin = _Layout.bgp_origin
    med = _Layout.med
    marks = _Layout.marks  # where the lists are in `path` (module doc; or the pair of their texts)

    def __new__(cls, *values: Any) -> BgpCandidate:
        if len(values) != len(BGP_FIELDS):
            raise TypeError(f"BgpCandidate takes {len(BGP_FIELDS)} values, got {len(values)}")
        return tuple.__new__(cls, values)

    @property
    def bgp(self) -> BgpAttrs:  # type: ignore[override]
        p = self[4]
        return tuple.__new__(BgpAttrs, (p.address, p.asn, p.router_id, p.ebgp, self[5], self.as_path, self[7],
                                        self[8], self.communities, self.large_communities))

    @property
    def as_path(self) -> tuple[int, ...]:
        m = self[9]
        return path_asns(self[6][:m & _START] if m.__class__ is int else self[6])

    @property
    def path_length(self) -> int:
        """The AS path's length as best path compares it (its AS numbers, as ``len(as_path)``)."""
        m = self[9]
        return (m & _START if m.__class__ is int else len(self[6])) >> 2

    @property
    def comms(self) -> int | tuple[str, ...]:
        """Where the communities start in ``path`` (or the tuple of their texts)."""
        m = self[9]
        return m & _START if m.__class__ is int else m[0]

    @property
    def large(self) -> int | tuple[str, ...]:
        """Where the large communities start in ``path`` (or the tuple of their texts)."""
        m = self[9]
        return len(self[6]) - (m >> MARK_SHIFT) if m.__class__ is int else m[1]

    @property
    def communities(self) -> Communities | tuple[str, ...]:
        m = self[9]
        if m.__class__ is not int:
            return m[0]
        path = self[6]
        raw = path[m & _START:len(path) - (m >> MARK_SHIFT)]
        return Communities.packed(raw) if raw else ()

    @property
    def large_communities(self) -> LargeCommunities | tuple[str, ...]:
        m = self[9]
        if m.__class__ is not int:
            return m[1]
        n = m >> MARK_SHIFT
        return LargeCommunities.packed(self[6][-n:]) if n else ()

    # the peer's values, as a `BgpAttrs` names them (read in C: ``attrgetter`` of the shared identity)
    peer_address = property(attrgetter("peer.address"))
    peer_as = property(attrgetter("peer.asn"))
    router_id = property(attrgetter("peer.router_id"))
    ebgp = property(attrgetter("peer.ebgp"))

    @property
    def neighbor_as(self) -> int:
        """The AS the path was learned from (first AS in the path, else the peer's AS)."""
        m = self[9]
        return _FIRST.unpack_from(self[6])[0] if (m & _START if m.__class__ is int else self[6]) else self[4].asn

    @classmethod
    def _make(cls, iterable: Any) -> BgpCandidate:
        return cls(*iterable)

    def _replace(self, **changes: Any) -> Candidate:
        values = list(self)
        _with_form(values, changes)
        bgp = changes.pop("bgp", _UNSET)
        if bgp is not _UNSET:  # new attributes (or none: a plain candidate)
            return _with_bgp(values, bgp, changes)
        lists = None
        for name, value in changes.items():
            i = _INDEX.get(name)
            if i is None or i in _PACKED:
                if name not in _READ_AS:
                    raise ValueError(f"got unexpected field name: {name!r}"
                                     + (" (set as_path, communities, large_communities)"
                                        if i or name in ("comms", "large") else ""))
                lists = lists or {}
                lists[name] = value
            else:
                values[i] = value
        if lists:
            values[6], values[9] = pack_attrs(
                pack_path(lists.get("as_path", self.as_path)),
                keep_communities(lists.get("communities", self.communities)),
                keep_communities(lists.get("large_communities", self.large_communities)))
        return tuple.__new__(BgpCandidate, values)

    def _asdict(self) -> dict[str, Any]:
        return {**{name: getattr(self, name) for name in LOGICAL[:4]}, "peer": self[4], "metric": self.metric,
                "path_id": self.path_id, **dict(zip(BGP_FIELDS[5:], self[5:]))}

    def __repr__(self) -> str:
        shown = {**self._asdict(), "path": self.as_path, "marks": (self.communities, self.large_communities)}
        return "BgpCandidate(" + ", ".join(f"{n}={v!r}" for n, v in shown.items()) + ")"


def bgp_candidate(origin: Origin, distance: int, nexthops: tuple[NextHop, ...], type: RouteType, bgp: Any,
                  metric: int | None = None, path_id: int | None = None) -> BgpCandidate:
    """The `BgpCandidate` with the attributes of `bgp` (a `BgpAttrs`, or anything with its fields)."""
    peer = peer_identity(bgp.peer_address, bgp.peer_as, bgp.router_id, bgp.ebgp)
    path, marks = pack_attrs(pack_path(bgp.as_path), keep_communities(bgp.communities),
                             keep_communities(bgp.large_communities))
    return tuple.__new__(BgpCandidate, (origin, distance, nexthops, form(type, metric, path_id), peer,
                                        bgp.local_pref, path, bgp.origin, bgp.med, marks))
