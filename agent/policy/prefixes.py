"""Prefix structures shared by policies and the hijack guard.

DOC: `PrefixIndex` (a set of prefixes answering "which entry covers P" and "which entries lie
inside P" in O(distinct lengths) and O(log n)) and `PrefixSet` (a policy's prefix set as
per-length dicts: network key -> bitmask of accepted lengths, one dict probe per distinct entry
length). Prefixes are `agent.core.model.Prefix` ints; `V6_FLAG` is the family bit.
"""

from __future__ import annotations

import socket
from bisect import bisect_left
from collections.abc import Iterable, Iterator

from ..core.model import Prefix, address_order

V6_FLAG = 1 << 136


# ---------------------------------------------------------------------------------------------
# Prefix structures
# ---------------------------------------------------------------------------------------------


def length_key(v6: bool, length: int) -> tuple[int, int]:
    """``(mask, tag)`` such that ``((prefix >> (prefix_length - length)) & mask) | tag`` is the
    packed network of the first `length` bits of a packed prefix of `v6`'s family at least that
    long: the network's bits move right, the mask keeps them (not the length octet, nor the
    family flag shifted down among the higher bits), the tag puts the length and flag back."""
    return ((1 << length) - 1) << 8, (V6_FLAG if v6 else 0) | length


def host_prefix(address: str) -> Prefix:
    """The /32 or /128 of an address text."""
    if ":" in address:
        return Prefix.of(6, int.from_bytes(socket.inet_pton(socket.AF_INET6, address), "big"), 128)
    return Prefix.of(4, int.from_bytes(socket.inet_pton(socket.AF_INET, address), "big"), 32)


class PrefixIndex:
    """An immutable set of prefixes with the two containment lookups route filters need.

    * `covering(p)`: the longest entry that contains `p` (equal or shorter): one set probe per
      distinct entry length of `p`'s family (at most 33 / 129, typically a handful).
    * `inside(p)`: the entries that `p` contains (equal or longer): a bisect over the entries'
      `address_order` keys (a network's more specifics are contiguous in address order).
    """

    __slots__ = ("_set", "_lengths", "_sorted", "_keys")

    def __init__(self, prefixes: Iterable[Prefix | str] = ()):
        items = {Prefix.parse(p) if isinstance(p, str) else Prefix(p) for p in prefixes}
        self._set = frozenset(items)
        self._lengths: tuple[tuple[tuple[int, int], ...], tuple[tuple[int, int], ...]] = tuple(  # type: ignore[assignment]
            tuple((n, *length_key(v6, n)) for n in sorted({p.length for p in items if bool(p & V6_FLAG) == v6}))
            for v6 in (False, True)
        )
        self._sorted = sorted(items, key=address_order)
        self._keys = list(map(address_order, self._sorted))

    def __contains__(self, prefix: object) -> bool:
        return prefix in self._set

    def __len__(self) -> int:
        return len(self._set)

    def __iter__(self) -> Iterator[Prefix]:
        return iter(self._sorted)

    def __bool__(self) -> bool:
        return bool(self._set)

    def covering(self, prefix: Prefix, strict: bool = False) -> Prefix | None:
        """The longest entry containing `prefix` (equal allowed unless `strict`), or None."""
        plen = prefix & 0xFF
        longest = plen - 1 if strict else plen
        found = None
        entries = self._set
        for length, mask, tag in self._lengths[1 if prefix & V6_FLAG else 0]:
            if length > longest:
                break
            key = ((prefix >> (plen - length)) & mask) | tag
            if key in entries:
                found = key
        return None if found is None else Prefix(found)

    def inside(self, prefix: Prefix, strict: bool = False) -> Iterator[Prefix]:
        """Entries that `prefix` contains (equal allowed unless `strict`), in address order."""
        plen = prefix & 0xFF
        bits = 128 if prefix & V6_FLAG else 32
        low = address_order(prefix) & ~0xFF
        high = low | (((1 << (bits - plen)) - 1) << 8) | 0xFF
        keys = self._keys
        i = bisect_left(keys, low)
        n = len(keys)
        while i < n and keys[i] <= high:
            elen = keys[i] & 0xFF
            if elen > plen or (elen == plen and not strict):
                yield self._sorted[i]
            i += 1

    def first_inside(self, prefix: Prefix, strict: bool = False) -> Prefix | None:
        """The first entry (in address order) that `prefix` contains, or None (no generator: hot)."""
        plen = prefix & 0xFF
        low = address_order(prefix) & ~0xFF
        high = low | (((1 << ((128 if prefix & V6_FLAG else 32) - plen)) - 1) << 8) | 0xFF
        keys = self._keys
        i = bisect_left(keys, low)
        n = len(keys)
        while i < n and keys[i] <= high:
            elen = keys[i] & 0xFF
            if elen > plen or (elen == plen and not strict):
                return self._sorted[i]
            i += 1
        return None


class PrefixSet:
    """A compiled prefix set: does a prefix match an entry (network + range of lengths)?

    Per family, per distinct entry length L: a dict from the packed network to a bitmask of the
    accepted prefix lengths. A lookup masks the prefix to each L not longer than itself and
    probes the dict: O(distinct lengths), independent of the number of entries.
    """

    __slots__ = ("_tables",)

    def __init__(self, entries: Iterable[tuple[Prefix, int, int]]):
        tables: tuple[dict[int, dict[int, int]], dict[int, dict[int, int]]] = ({}, {})
        for net, low, high in entries:
            net = Prefix(net)
            plen = net.length
            if not plen <= low <= high <= net.bits:
                raise ValueError(f"bad length range {low}..{high} for {net}")
            bitmask = ((1 << (high + 1)) - 1) ^ ((1 << low) - 1)
            table = tables[1 if net & V6_FLAG else 0].setdefault(plen, {})
            table[int(net)] = table.get(int(net), 0) | bitmask
        self._tables = tuple(
            tuple((n, *length_key(v6, n), tables[v6][n]) for n in sorted(tables[v6]))
            for v6 in (0, 1)
        )

    def match(self, prefix: Prefix) -> bool:
        plen = prefix & 0xFF
        for length, mask, tag, table in self._tables[1 if prefix & V6_FLAG else 0]:
            if length > plen:
                return False
            lengths = table.get(((prefix >> (plen - length)) & mask) | tag)
            if lengths is not None and lengths >> plen & 1:
                return True
        return False

    __contains__ = match


