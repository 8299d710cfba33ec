"""BFD control packet codec: round trips, a BIRD-shaped packet, and every discard rule of
RFC 5880 6.8.6 that needs no session."""

import struct

import pytest

from agent.bfd.packet import ControlPacket, Diag, Malformed, State, decode, encode


def raw(vers=1, diag=0, state=1, flags=0, mult=3, length=24, mine=7, yours=0,
        tx=1_000_000, rx=300_000, echo=0, extra=b""):
    return struct.pack("!BBBBIIIII", (vers << 5) | diag, (state << 6) | flags, mult, length,
                       mine, yours, tx, rx, echo) + extra


def test_round_trip():
    p = ControlPacket(State.UP, 0x01020304, 0xA0B0C0D0, 100_000, 200_000, 5,
                      diag=Diag.DETECTION_TIME_EXPIRED, poll=True)
    data = encode(p)
    assert len(data) == 24
    assert data[0] == (1 << 5) | 1 and data[1] == (3 << 6) | 0x20 and data[2] == 5 and data[3] == 24
    assert decode(data) == p


def test_final_bit_and_fields():
    p = decode(raw(state=3, flags=0x10, yours=9, tx=50_000, rx=60_000, echo=0))
    assert p.final and not p.poll and p.state is State.UP
    assert (p.my_discriminator, p.your_discriminator, p.desired_min_tx, p.required_min_rx) == (7, 9, 50_000, 60_000)


def test_trailing_bytes_beyond_length_are_ignored():
    assert decode(raw(extra=b"\0" * 4)).detect_mult == 3


@pytest.mark.parametrize("data,reason", [
    (raw()[:23], "length"),  # shorter than the mandatory section
    (raw(vers=0), "version"),
    (raw(vers=2), "version"),
    (raw(length=20), "length"),  # length field below 24
    (raw(length=28), "length"),  # length field beyond the payload
    (raw(mult=0), "multiplier"),
    (raw(flags=0x01), "multipoint"),
    (raw(mine=0), "my_discriminator"),
    (raw(state=3, yours=0), "zero_your_discriminator"),  # Up with your discriminator 0
    (raw(state=2, yours=0), "zero_your_discriminator"),  # Init likewise
    (raw(flags=0x04, length=24), "length"),  # A bit: the auth section must be there
    (raw(flags=0x04, length=28, extra=b"\x01\x04\x01\x00"), "authentication"),  # not configured
])
def test_discarded(data, reason):
    with pytest.raises(Malformed) as exc:
        decode(data)
    assert exc.value.reason == reason


@pytest.mark.parametrize("state", [0, 1])
def test_zero_your_discriminator_allowed_in_down_and_admin_down(state):
    assert decode(raw(state=state, yours=0)).your_discriminator == 0


def test_unknown_diag_kept_as_none():
    assert decode(raw(diag=31)).diag is Diag.NONE
