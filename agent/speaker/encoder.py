"""ExaBGP's process API, outbound: typed commands in, text lines out.

DOC: `encode(command)` turns a command of `agent.core.bgp` (`AnnounceRoute`, `AnnounceAttributes`,
`WithdrawRoute`, `WithdrawAttributes`, `AnnounceEor`, `Teardown`, `RequestRouteRefresh`,
`SendNotification`) into
the one line ExaBGP's API takes, checking every value on the way (addresses, prefixes,
communities, 32-bit integers): a malformed command raises ValueError here, never reaches ExaBGP.
``peer`` None addresses every neighbour of the ExaBGP process. ``next_hop="self"`` is the
session's local address (only valid when the route's family matches the session's: give an
explicit next hop for IPv6 routes on an IPv4 session). A raw string is checked to be one line
and passed through.
"""

from __future__ import annotations

import ipaddress

from ..core.model import BgpOrigin, Prefix
from ..core.bgp import (
    AnnounceAttributes,
    AnnounceEor,
    AnnounceRoute,
    Command,
    Family,
    RequestRouteRefresh,
    SendNotification,
    Teardown,
    WithdrawAttributes,
    WithdrawRoute,
)


def _selector(peer: str | None) -> str:
    return f"neighbor {ipaddress.ip_address(peer)} " if peer else ""


def _community(text: str, parts: int) -> str:
    items = text.split(":")
    if len(items) != parts or not all(i.isdigit() for i in items):
        raise ValueError(f"invalid {'large ' if parts == 3 else ''}community {text!r}")
    limit = 0xFFFF if parts == 2 else 0xFFFFFFFF
    if any(int(i) > limit for i in items):
        raise ValueError(f"community {text!r}: value out of range")
    return ":".join(str(int(i)) for i in items)


def _attributes(cmd) -> str:
    """``next-hop ... [origin ...] [local-preference ...] ...`` of an announce command."""
    nh = "self" if cmd.next_hop == "self" else str(ipaddress.ip_address(cmd.next_hop))
    parts = [f"next-hop {nh}"]
    if cmd.origin is not None:
        parts.append(f"origin {BgpOrigin(cmd.origin).name.lower()}")
    if cmd.local_pref is not None:
        parts.append(f"local-preference {_u32(cmd.local_pref)}")
    if cmd.med is not None:
        parts.append(f"med {_u32(cmd.med)}")
    if cmd.as_path:
        parts.append("as-path [ " + " ".join(str(_u32(a)) for a in cmd.as_path) + " ]")
    if cmd.communities:
        parts.append("community [ " + " ".join(_community(c, 2) for c in cmd.communities) + " ]")
    if cmd.large_communities:
        parts.append("large-community [ " + " ".join(_community(c, 3) for c in cmd.large_communities) + " ]")
    return " ".join(parts)


def _nlri(prefixes) -> str:
    if not prefixes:
        raise ValueError("an attributes command without prefixes")
    return " ".join(str(Prefix.parse(str(p))) for p in prefixes)


def _enc_announce_route(cmd: AnnounceRoute) -> str:
    prefix = Prefix.parse(str(cmd.prefix))
    return f"{_selector(cmd.peer)}announce route {prefix} {_attributes(cmd)}"


def _enc_announce_attributes(cmd: AnnounceAttributes) -> str:
    return f"{_selector(cmd.peer)}announce attributes {_attributes(cmd)} nlri {_nlri(cmd.prefixes)}"


def _enc_withdraw_attributes(cmd: WithdrawAttributes) -> str:
    return f"{_selector(cmd.peer)}withdraw attributes next-hop self nlri {_nlri(cmd.prefixes)}"


def _enc_withdraw_route(cmd: WithdrawRoute) -> str:
    return f"{_selector(cmd.peer)}withdraw route {Prefix.parse(str(cmd.prefix))}"


def _enc_announce_eor(cmd: AnnounceEor) -> str:
    return f"{_selector(cmd.peer)}announce eor {Family(cmd.family).afi_safi}"


def _enc_teardown(cmd: Teardown) -> str:
    if not 0 < cmd.subcode < 256:
        raise ValueError(f"invalid Cease subcode {cmd.subcode}")
    return f"{_selector(cmd.peer)}teardown {cmd.subcode}"


def _enc_request_route_refresh(cmd: RequestRouteRefresh) -> str:
    return f"{_selector(cmd.peer)}announce route-refresh {Family(cmd.family).afi_safi}"


NOTIFICATION_DATA_MAX = 4096 - 21  # a NOTIFICATION without extended messages: header 19, code 2


def _enc_send_notification(cmd: SendNotification) -> str:
    """``neighbor PEER notify CODE SUBCODE [HEX]`` (the raw-UPDATE launcher's command)."""
    if not cmd.peer:
        raise ValueError("a NOTIFICATION goes to one peer")
    if not 0 < cmd.code < 256 or not 0 <= cmd.subcode < 256:
        raise ValueError(f"invalid NOTIFICATION code/subcode {cmd.code}/{cmd.subcode}")
    if len(cmd.data) > NOTIFICATION_DATA_MAX:
        raise ValueError(f"NOTIFICATION data of {len(cmd.data)} octets (at most {NOTIFICATION_DATA_MAX})")
    data = f" {bytes(cmd.data).hex()}" if cmd.data else ""
    return f"{_selector(cmd.peer)}notify {cmd.code} {cmd.subcode}{data}"


_ENCODERS = {
    AnnounceRoute: _enc_announce_route,
    AnnounceAttributes: _enc_announce_attributes,
    WithdrawAttributes: _enc_withdraw_attributes,
    WithdrawRoute: _enc_withdraw_route,
    AnnounceEor: _enc_announce_eor,
    Teardown: _enc_teardown,
    RequestRouteRefresh: _enc_request_route_refresh,
    SendNotification: _enc_send_notification,
}


def encode(command: Command | str) -> str:
    """The ExaBGP API text line for `command` (a raw string is checked to be one line and passed through)."""
    text = command if isinstance(command, str) else _ENCODERS[type(command)](command)
    if "\n" in text or "\r" in text or not text.strip():
        raise ValueError(f"a command is one non-empty line: {text!r}")
    return text


def _u32(value: int) -> int:
    if not isinstance(value, int) or not 0 <= value <= 0xFFFFFFFF:
        raise ValueError(f"{value!r} is not a 32-bit unsigned integer")
    return value
