"""Prefixes: an IPv4 or IPv6 network as one int.

DOC: `Prefix` is an `int` subclass with no instance dict: the network, the prefix length and the
family are packed into one integer (``net << 8 | len``, bit 136 set for IPv6), where ``net`` is
the network's own bits, right-aligned (``address >> (bits - len)``: 10.1.2.0/24 is 0x0a0102).
One small int is the whole key, and it prints as ``10.0.0.0/24``. Right-aligned, because an
int hashes as itself and a dict's slot comes from the hash's low bits: with the address
left-aligned (``address << 8 | len``, before) a /24's low 16 bits were all alike, the 1.2M
prefixes of a full table started their probes in 97 slots, and a probe of the big
prefix-keyed dicts took 5.6 steps on average (2.6 now; tests/test_prefix_packing.py). The
price: ints sort by network, not by address; `address_order` is the key for showing them in
address order. It equals and hashes as its int, so received prefixes stay **plain ints**
(`agent.speaker.wire_records`: 16 octets less per route, and nothing for the cyclic collector
to track) and every table may hold both: code uses integer operations on them and calls
`as_prefix` before a property or printing (views, log lines; tests/test_plain_prefixes.py).
"""

from __future__ import annotations

import ipaddress
import socket
import struct

V6_FLAG = _V6_FLAG = 1 << 136  # a packed prefix's IPv6 bit (`Prefix`)
_V4 = struct.Struct("!I").unpack
_pton = socket.inet_pton
_AF_INET, _AF_INET6 = socket.AF_INET, socket.AF_INET6
_int_new = int.__new__


class Prefix(int):
    """An IPv4 or IPv6 network packed into one int: ``(v6 << 136) | (net << 8) | length``, ``net``
    the network's bits right-aligned (``address >> (bits - length)``; module DOC)."""

    __slots__ = ()

    @classmethod
    def parse(cls, text: str) -> "Prefix":
        """Parse ``10.0.0.0/24`` or ``2001:db8::/32``; host bits set is an error (ValueError).

        The fast path (inet_pton) handles well-formed input; anything it refuses goes through
        `ipaddress` for the error message.
        """
        addr, _, length = text.partition("/")
        if length.isdigit() and length.isascii():
            plen = int(length)
            try:
                if ":" not in addr:
                    value = _V4(_pton(_AF_INET, addr))[0]
                    if plen <= 32 and not value & (0xFFFFFFFF >> plen):
                        return _int_new(cls, pack_prefix(4, value, plen))
                else:
                    value = int.from_bytes(_pton(_AF_INET6, addr), "big")
                    if plen <= 128 and not value & ((1 << (128 - plen)) - 1):
                        return _int_new(cls, pack_prefix(6, value, plen))
            except OSError:
                pass
        net = ipaddress.ip_network(text, strict=True)
        return cls.of(net.version, int(net.network_address), net.prefixlen)

    @classmethod
    def of(cls, family: int, address: int, length: int) -> "Prefix":
        """Build from family (4 or 6), the address as an int (host bits are dropped), and the
        prefix length."""
        return _int_new(cls, pack_prefix(family, address, length))

    @property
    def family(self) -> int:
        return 6 if self & _V6_FLAG else 4

    @property
    def length(self) -> int:
        return self & 0xFF

    @property
    def address(self) -> int:
        return prefix_address(self)

    @property
    def bits(self) -> int:
        return 128 if self & _V6_FLAG else 32

    @property
    def network(self) -> ipaddress.IPv4Network | ipaddress.IPv6Network:
        cls = ipaddress.IPv6Network if self & _V6_FLAG else ipaddress.IPv4Network
        return cls((self.address, self.length))

    def contains_address(self, family: int, address: int) -> bool:
        """True when the host address (as int) of `family` lies inside this prefix."""
        if family != self.family:
            return False
        return (address >> (self.bits - (self & 0xFF))) == (self & _NET) >> 8  # (its network)

    def covers(self, other: int) -> bool:
        """True when `other` (a `Prefix` or its plain int) is this prefix or lies inside it."""
        length = self & 0xFF
        longer = other & 0xFF
        if length > longer or (self ^ other) & _V6_FLAG:
            return False
        return ((other & _NET) >> (8 + longer - length)) == (self & _NET) >> 8

    def __str__(self) -> str:
        return str(self.network)

    def __repr__(self) -> str:
        return f"Prefix('{self}')"

    def __format__(self, spec: str) -> str:
        return format(str(self), spec)


_NET = _V6_FLAG - 1  # (a packed prefix without its family bit)


def pack_prefix(family: int, address: int, length: int) -> int:
    """The packed int of the network of `length` bits of `address` (an int) in `family` (4, 6)."""
    if family == 6:
        return _V6_FLAG | ((address >> (128 - length)) << 8) | length
    return ((address >> (32 - length)) << 8) | length


def prefix_address(value: int) -> int:
    """The network address (an int) of a packed prefix (a `Prefix` or its plain int)."""
    length = value & 0xFF
    if value & _V6_FLAG:
        return ((value & _NET) >> 8) << (128 - length)
    return (value >> 8) << (32 - length)


def address_order(value: int) -> int:
    """Sort key of packed prefixes in address order (IPv4 first, then by address, then by length):
    the ints themselves sort by network (module DOC)."""
    length = value & 0xFF
    if value & _V6_FLAG:
        return _V6_FLAG | (((value & _NET) >> 8) << (136 - length)) | length
    return ((value >> 8) << (40 - length)) | length


def as_prefix(value: int) -> Prefix:
    """`value` (a `Prefix` or the plain int of a received one, see the module DOC) as a `Prefix`."""
    return value if value.__class__ is Prefix else _int_new(Prefix, value)


def prefix_family(value: int) -> int:
    """4 or 6, for a `Prefix` or its plain int."""
    return 6 if value & _V6_FLAG else 4
