"""Communities of a received path, packed: one bytes object per list instead of a text per value.

DOC: the wire decoder (`agent.speaker.wire_values`) keeps a path's COMMUNITIES and
LARGE_COMMUNITY as `Communities` / `LargeCommunities`: the values' octets (4 and 12 per value),
in the order the decoder gives them (sorted by value; large communities without duplicates), in
one immutable `bytes`. To everything that reads them they are the tuple of texts they stand for
(``"65000:100"``, ``"65000:1:2"``): iteration, ``len``, index, ``in``, ``+`` (gives a tuple),
``==`` with a tuple of those texts (and the same hash), ``repr``. Texts are made on demand: a
policy with community conditions and the read views make them; learning a table does not.

Why: a full table's sets carry communities whose values rarely repeat across the table, and a
text per value (50-60 octets each, plus the tuple's 8 per slot) was ~70 octets per route, the
largest block after the prefix-keyed tables (docs/benchmarks.md, "Packed community lists").
Packed, a list of n values is one object of ~49 + 4n octets (12n for large communities): a
`bytes` subclass, not a wrapper around a `bytes` (24 octets less per list, one object instead of
two).

``==`` between two packed lists compares their octets; the hash is that of the tuple of texts (so
a packed list and its tuple are interchangeable as keys), computed only when asked: the decoders
key their memos by the octets (`raw`), never by these objects. The JSON decoder (ExaBGP decodes)
keeps tuples of texts; both compare equal.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator

_U32 = struct.Struct(">I")
_bytes_new, _bytes_eq, _bytes_len = bytes.__new__, bytes.__eq__, bytes.__len__


class Communities(bytes):
    """Standard communities (RFC 1997) as their 4-octet values, packed (see the module DOC).
    The object is its octets (a `bytes` subclass without slots: one object of ~49 + 4n octets),
    but behaves as the tuple of its texts."""

    __slots__ = ()
    WIDTH = 4

    def __new__(cls, raw: bytes = b"") -> "Communities":
        if len(raw) % cls.WIDTH:
            raise ValueError(f"{cls.__name__} of {len(raw)} octets (not a multiple of {cls.WIDTH})")
        return _bytes_new(cls, raw)

    @classmethod
    def packed(cls, raw: bytes) -> "Communities":
        """From octets known to be whole values (the decoders' fast path: no check)."""
        return _bytes_new(cls, raw)

    @property
    def raw(self) -> bytes:
        """The octets, as a plain `bytes` (what the decoders key and send a list by)."""
        return bytes(self)

    @classmethod
    def of_values(cls, values) -> "Communities":
        """From 32-bit values, in the order given."""
        return cls(b"".join(map(_U32.pack, values)))

    def values(self) -> tuple[int, ...]:
        """The 32-bit words (one per community; three per large community)."""
        return struct.unpack(f">{_bytes_len(self) >> 2}I", self)

    def texts(self) -> tuple[str, ...]:
        return tuple([f"{v >> 16}:{v & 0xFFFF}" for v in self.values()])

    def __iter__(self) -> Iterator[str]:  # type: ignore[override]
        return iter(self.texts())

    def __len__(self) -> int:
        return _bytes_len(self) // self.WIDTH

    def __bool__(self) -> bool:
        return _bytes_len(self) != 0

    def __getitem__(self, index):  # type: ignore[override]
        return self.texts()[index]

    def __contains__(self, text: object) -> bool:  # type: ignore[override]
        return text in self.texts()

    def __add__(self, other):  # type: ignore[override]
        if isinstance(other, (tuple, Communities)):
            return self.texts() + tuple(other)
        return NotImplemented

    def __radd__(self, other):
        if isinstance(other, tuple):
            return other + self.texts()
        return NotImplemented

    def __eq__(self, other: object) -> bool:
        if other.__class__ is self.__class__:
            return _bytes_eq(self, other)
        if isinstance(other, tuple):
            return self.texts() == other
        if isinstance(other, bytes):  # another kind of list, or plain octets: never equal
            return False
        return NotImplemented

    def __ne__(self, other: object) -> bool:
        eq = self.__eq__(other)
        return eq if eq is NotImplemented else not eq

    def __hash__(self) -> int:
        return hash(self.texts())

    def __repr__(self) -> str:
        return repr(self.texts())

    def __str__(self) -> str:
        return str(self.texts())

    def __reduce__(self):
        return (self.__class__, (bytes(self),))


def octets(values: "Communities | tuple") -> "bytes | tuple":
    """What the decoders key and send a list by: its octets, or the empty tuple when absent."""
    return values if values.__class__ is tuple else bytes(values)


class LargeCommunities(Communities):
    """Large communities (RFC 8092) as their 12-octet values, packed (see the module DOC)."""

    __slots__ = ()
    WIDTH = 12

    @classmethod
    def of_values(cls, values) -> "LargeCommunities":
        """From (global administrator, local 1, local 2) triples, in the order given."""
        return cls(b"".join([struct.pack(">III", *v) for v in values]))

    def texts(self) -> tuple[str, ...]:
        it = iter(self.values())
        return tuple([f"{a}:{b}:{c}" for a, b, c in zip(it, it, it)])
