"""BFD control packets (RFC 5880 section 4.1): encode, decode, and the reception checks.

DOC: pure. `decode(data)` returns a frozen `ControlPacket` or raises `Malformed` whose
``reason`` is one of `DROP_REASONS` (the checks of RFC 5880 section 6.8.6 that need no session:
version, length, detect multiplier, multipoint bit, my discriminator, a zero your-discriminator
outside Down/AdminDown, authentication, which we do not implement so a packet with the A bit is
dropped). The checks that need the session table (an unknown your-discriminator) and the TTL
check of RFC 5881 are made by the caller and counted with the same reason vocabulary.

Intervals are carried in microseconds, as on the wire.
"""

from __future__ import annotations

import enum
import struct
from dataclasses import dataclass

VERSION = 1
HEADER = struct.Struct("!BBBBIIIII")  # 24 bytes: the mandatory section
HEADER_LEN = HEADER.size

# flag bits of the second byte (below the two state bits)
POLL, FINAL, CPI, AUTH, DEMAND, MULTIPOINT = 0x20, 0x10, 0x08, 0x04, 0x02, 0x01


class State(enum.IntEnum):
    ADMIN_DOWN = 0
    DOWN = 1
    INIT = 2
    UP = 3

    @property
    def label(self) -> str:
        return {0: "admindown", 1: "down", 2: "init", 3: "up"}[self.value]


class Diag(enum.IntEnum):
    NONE = 0
    DETECTION_TIME_EXPIRED = 1
    ECHO_FAILED = 2
    NEIGHBOR_DOWN = 3
    FORWARDING_RESET = 4
    PATH_DOWN = 5
    CONCAT_PATH_DOWN = 6
    ADMIN_DOWN = 7
    REVERSE_CONCAT_PATH_DOWN = 8


DROP_REASONS = ("version", "length", "multiplier", "multipoint", "my_discriminator",
                "zero_your_discriminator", "authentication", "unknown_session", "ttl", "source")


class Malformed(ValueError):
    """A received packet that RFC 5880 section 6.8.6 says to discard; `reason` names the check."""

    def __init__(self, reason: str, detail: str = "") -> None:
        assert reason in DROP_REASONS
        super().__init__(f"{reason}: {detail}" if detail else reason)
        self.reason = reason


@dataclass(frozen=True, slots=True)
class ControlPacket:
    state: State
    my_discriminator: int
    your_discriminator: int
    desired_min_tx: int  # microseconds
    required_min_rx: int  # microseconds
    detect_mult: int
    diag: Diag = Diag.NONE
    poll: bool = False
    final: bool = False
    cpi: bool = False  # control plane independent
    demand: bool = False
    required_min_echo_rx: int = 0


def encode(p: ControlPacket) -> bytes:
    flags = ((POLL if p.poll else 0) | (FINAL if p.final else 0) | (CPI if p.cpi else 0)
             | (DEMAND if p.demand else 0))
    return HEADER.pack((VERSION << 5) | int(p.diag), (int(p.state) << 6) | flags, p.detect_mult,
                       HEADER_LEN, p.my_discriminator, p.your_discriminator, p.desired_min_tx,
                       p.required_min_rx, p.required_min_echo_rx)


def decode(data: bytes) -> ControlPacket:
    """The packet in `data` (one UDP payload), or `Malformed` (RFC 5880 section 6.8.6)."""
    if len(data) < HEADER_LEN:
        raise Malformed("length", f"{len(data)} bytes, the mandatory section is {HEADER_LEN}")
    b0, b1, mult, length, mine, yours, tx, rx, echo = HEADER.unpack_from(data)
    if b0 >> 5 != VERSION:
        raise Malformed("version", f"version {b0 >> 5}")
    auth = bool(b1 & AUTH)
    if length < (HEADER_LEN + 2 if auth else HEADER_LEN) or length > len(data):
        raise Malformed("length", f"length field {length}, payload {len(data)} bytes")
    if mult == 0:
        raise Malformed("multiplier", "detect multiplier 0")
    if b1 & MULTIPOINT:
        raise Malformed("multipoint", "M bit set")
    if mine == 0:
        raise Malformed("my_discriminator", "my discriminator 0")
    state = State(b1 >> 6)
    if yours == 0 and state not in (State.DOWN, State.ADMIN_DOWN):
        raise Malformed("zero_your_discriminator", f"your discriminator 0 in state {state.label}")
    if auth:  # no authentication configured on our sessions: RFC 5880 6.8.6 says discard
        raise Malformed("authentication", "A bit set, no authentication configured")
    diag = b0 & 0x1F
    return ControlPacket(state, mine, yours, tx, rx, mult,
                         diag=Diag(diag) if diag <= 8 else Diag.NONE,
                         poll=bool(b1 & POLL), final=bool(b1 & FINAL), cpi=bool(b1 & CPI),
                         demand=bool(b1 & DEMAND), required_min_echo_rx=echo)
