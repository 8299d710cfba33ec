"""ExaBGP 5.0.15's own UPDATE decoder as an oracle for the wire codec's tests and benchmark.

DOC: `exabgp_events(body, caps)` does to an UPDATE body what the JSON path does today: ExaBGP's
`Message.unpack` with a `Negotiated` built from the raw-update capability bits (`negotiated`),
the treat-as-withdraw flip of ``reactor/protocol.py`` (its NLRI become withdrawals), the JSON
ExaBGP writes to the API (`Response.JSON.update`), then the agent's JSON `Decoder`. The result
is the tuple of events the agent gets today, or `Refused(code, subcode)` when ExaBGP answers with
a NOTIFICATION (a session reset), `Crashed(exc)` when its decoder raises anything else
(ExaBGP then sends 1/0), or `Dropped(error)` when the agent's JSON decoder refuses the line.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

os.environ.setdefault("exabgp_log_level", "WARNING")

from exabgp.bgp.message import Message  # noqa: E402
from exabgp.bgp.message.action import Action  # noqa: E402
from exabgp.bgp.message.direction import Direction  # noqa: E402
from exabgp.bgp.message.notification import Notify  # noqa: E402
from exabgp.bgp.message.open.capability.negotiated import Negotiated  # noqa: E402
from exabgp.bgp.message.update.attribute import Attribute  # noqa: E402
from exabgp.environment import getenv  # noqa: E402
from exabgp.logger import log  # noqa: E402
from exabgp.protocol.family import AFI, SAFI  # noqa: E402
from exabgp.reactor.api.response import Response  # noqa: E402
from exabgp.version import json as json_version  # noqa: E402

from agent.speaker.codec import CodecError, Decoder  # noqa: E402

log.init(getenv())

PEER = "192.0.2.1"
UPDATE = 2


class _Neighbor(dict):
    uid = 1


NEIGHBOR = _Neighbor({"local-address": "192.0.2.2", "peer-address": PEER, "local-as": 65001,
                      "peer-as": 65000, "router-id": "192.0.2.2"})
JSON = Response.JSON(json_version)


@dataclass(frozen=True)
class Refused:
    code: int
    subcode: int
    message: str = ""


@dataclass(frozen=True)
class Crashed:
    error: str


@dataclass(frozen=True)
class Dropped:
    """The JSON decoder refused ExaBGP's line (`CodecError`): the channel logs and drops it."""

    error: str


def negotiated(caps: int) -> Negotiated:
    """A Negotiated as ExaBGP has it for a session whose raw-update capability bits are `caps`."""
    n = Negotiated({"capability": {"aigp": False}})
    n.asn4 = bool(caps & 1)
    n.families = [(AFI.ipv4, SAFI.unicast), (AFI.ipv6, SAFI.unicast)]
    n.addpath._receive[(AFI.ipv4, SAFI.unicast)] = bool(caps & 2)
    n.addpath._receive[(AFI.ipv6, SAFI.unicast)] = bool(caps & 4)
    n.msg_size = 65535 if caps & 8 else 4096
    return n


def exabgp_message(body: bytes, caps: int):
    return Message.unpack(UPDATE, body, Direction.IN, negotiated(caps))


def exabgp_flagged(body: bytes, caps: int) -> bool:
    """True when ExaBGP itself applied an RFC 7606 action (its treat-as-withdraw or discard
    marker is in the attributes: the JSON line then carries an ``error`` attribute)."""
    try:
        attributes = getattr(exabgp_message(body, caps), "attributes", None) or {}
    except Exception:
        return False
    return (Attribute.CODE.INTERNAL_TREAT_AS_WITHDRAW in attributes
            or Attribute.CODE.INTERNAL_DISCARD in attributes)


def exabgp_events(body: bytes, caps: int = 1, decoder: Decoder | None = None):
    """The events the JSON path gives for `body` (see the module DOC)."""
    try:
        message = exabgp_message(body, caps)
    except Notify as exc:
        return Refused(exc.code, exc.subcode, str(exc))
    except Exception as exc:  # reactor/protocol.py: Notify(1, 0)
        return Crashed(repr(exc))
    attributes = getattr(message, "attributes", None)
    if attributes is not None and Attribute.CODE.INTERNAL_TREAT_AS_WITHDRAW in attributes:
        for nlri in message.nlris:
            nlri.action = Action.WITHDRAW
    line = JSON.update(NEIGHBOR, "receive", message, None, b"", b"")
    try:
        return (decoder or Decoder()).decode(line)
    except CodecError as exc:
        return Dropped(str(exc)[:200])
