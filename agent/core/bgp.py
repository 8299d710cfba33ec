"""Typed messages between the speaker adapter and the agent: events out, nothing else.

DOC: everything the speaker reports is a frozen, slotted value (hashable, readable repr). The
codec (`agent.speaker.codec`) builds them from ExaBGP's JSON lines; the supervisor
(`agent.speaker.process`) adds its own (`SpeakerRestarted`, and `PeerState` down for the peers of
an ExaBGP that died, since a dead ExaBGP reports nothing).

A peer is named by its address as written in the `BgpPeer` (canonical text). Families are the two
the agent handles, `Family.IPV4_UNICAST` / `Family.IPV6_UNICAST`; their values are the spellings
of the configuration (``ipv4-unicast``), `Family.afi_safi` gives ExaBGP's (``ipv4 unicast``).

A malformed UPDATE (decoded by the agent's own wire codec, RFC 7606) is reported as an
`UpdateError` with the action taken; `SendNotification` is the command that resets a session.

`RouteUpdate.announced` holds `Announced(prefix, next_hop, attrs, link_local)` tuples (or the
same as runs of prefixes: `AnnouncedRuns`; and, for an ADD-PATH family, `RouteUpdate.path_ids`
the path id of each). One event of runs may stand for several UPDATEs that only announce
(`AnnouncedRuns.messages`, `RouteUpdate.messages`). All the
prefixes of one UPDATE share one `PathAttrs` object (and the decoder re-uses equal attribute sets
across UPDATEs), so a large table costs one small object per distinct attribute set.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass, field
from operator import itemgetter
from typing import NamedTuple

from .model import BgpOrigin, Prefix


class Family(str, enum.Enum):
    IPV4_UNICAST = "ipv4-unicast"
    IPV6_UNICAST = "ipv6-unicast"

    @property
    def afi_safi(self) -> str:
        """ExaBGP's spelling: ``ipv4 unicast``."""
        return self.value.replace("-", " ")

    @property
    def ip_version(self) -> int:
        return 6 if self is Family.IPV6_UNICAST else 4

    @classmethod
    def from_afi_safi(cls, afi: str, safi: str) -> "Family | None":
        """``("ipv4", "unicast")`` -> IPV4_UNICAST; None for families the agent does not handle."""
        return _BY_AFI_SAFI.get((afi, safi))


_BY_AFI_SAFI = {("ipv4", "unicast"): Family.IPV4_UNICAST, ("ipv6", "unicast"): Family.IPV6_UNICAST}


class PathAttrs(NamedTuple):
    """The path attributes of one UPDATE, as received. None: the attribute was absent. (A named
    tuple: the wire codec builds one per distinct attribute set, the costly case per route, and
    a tuple is built several times faster than a frozen dataclass.)"""

    origin: BgpOrigin = BgpOrigin.IGP
    as_path: tuple[int, ...] = ()  # AS_SEQUENCE members in order; AS_SET members appended
    as_set: bool = False  # the path contained an AS_SET (its members are in as_path, unordered)
    med: int | None = None
    local_pref: int | None = None
    communities: tuple[str, ...] = ()  # "65000:100", in received order
    large_communities: tuple[str, ...] = ()  # "65000:1:2"
    extended_communities: tuple[str, ...] = ()  # ExaBGP's text, e.g. "target:65000:1"
    atomic_aggregate: bool = False
    originator_id: str | None = None
    cluster_list: tuple[str, ...] = ()
    # members of AS_CONFED_SEQUENCE / AS_CONFED_SET segments, in order (RFC 5065: not part of the
    # path length, so never in `as_path`); only the wire codec sees them, ExaBGP's JSON does not
    confed_path: tuple[int, ...] = ()


class Announced(NamedTuple):
    """One announced prefix. `next_hop` is the address to forward to: for IPv6 the global next
    hop when the UPDATE carried one, else the link-local; `link_local` is the link-local next hop
    when the UPDATE carried both (a fallback for when the global one is not directly connected)."""

    prefix: Prefix
    next_hop: str
    attrs: PathAttrs
    link_local: str | None = None


_PREFIXES = itemgetter(0)


class AnnouncedRuns(Sequence):
    """`RouteUpdate.announced` kept as the runs it was decoded in: ``(prefixes, next_hop, attrs,
    link_local)`` each, the prefixes of a run sharing the rest. The relay's records arrive that
    way (`agent.speaker.wire_records`): the BGP source hands each run to the import stage as one
    batch (`runs`), so a table costs no `Announced` tuple per prefix. As a sequence it is the
    `Announced` tuples (built on first use), equal to the tuple of them.

    `messages`: the UPDATEs the runs come from. The relay's rebuild makes one event of the
    successive UPDATEs of a peer and family that announce and withdraw nothing
    (`agent.speaker.wire_records`), so the BGP source and the import stage take them in one call
    (`ImportStage.receive_runs`), which does for each run what one event each would have done."""

    __slots__ = ("runs", "messages", "_len", "_flat")

    def __init__(self, runs: tuple[tuple[tuple[Prefix, ...], str, PathAttrs, str | None], ...],
                 messages: int = 1) -> None:
        self.runs = runs
        self.messages = messages
        self._len = sum(map(len, map(_PREFIXES, runs)))  # (no Python step per run)
        self._flat: tuple[Announced, ...] | None = None

    def _all(self) -> tuple[Announced, ...]:
        if self._flat is None:
            self._flat = tuple(Announced(p, nh, attrs, ll) for prefixes, nh, attrs, ll in self.runs
                               for p in prefixes)
        return self._flat

    def __len__(self) -> int:
        return self._len

    def __getitem__(self, index):
        return self._all()[index]

    def __iter__(self):
        return iter(self._all())

    def __eq__(self, other: object) -> bool:
        if isinstance(other, AnnouncedRuns):
            other = other._all()
        return self._all() == other if isinstance(other, tuple) else NotImplemented

    def __hash__(self) -> int:
        return hash(self._all())

    def __repr__(self) -> str:
        return repr(self._all())


@dataclass(frozen=True, slots=True)
class RouteUpdate:
    """One received UPDATE (for one family): prefixes announced and withdrawn.

    With ADD-PATH negotiated for the family (RFC 7911) every route carries a path id: then
    `path_ids` holds the path id of each `announced` route and `withdrawn_path_ids` that of each
    `withdrawn` prefix, in the same order (a path is (peer, prefix, path id)); without ADD-PATH
    both are None."""

    peer: str
    family: Family
    announced: tuple[Announced, ...] | AnnouncedRuns = ()
    withdrawn: tuple[Prefix, ...] = ()
    path_ids: tuple[int, ...] | None = None
    withdrawn_path_ids: tuple[int, ...] | None = None

    @property
    def messages(self) -> int:
        """The UPDATE messages this event stands for (`AnnouncedRuns.messages`)."""
        return self.announced.messages if self.announced.__class__ is AnnouncedRuns else 1


@dataclass(frozen=True, slots=True)
class EndOfRib:
    """The peer has sent its whole table for `family` (RFC 4724 End-of-RIB marker)."""

    peer: str
    family: Family


class PeerStatus(str, enum.Enum):
    CONNECTED = "connected"  # TCP session established, OPEN exchange under way
    UP = "up"  # BGP session established
    DOWN = "down"  # session gone; ExaBGP sends no withdraws: the routes are the agent's to drop


@dataclass(frozen=True, slots=True)
class PeerState:
    peer: str
    state: PeerStatus
    reason: str = ""


@dataclass(frozen=True, slots=True)
class Notification:
    """A NOTIFICATION message received from (direction "receive") or sent to the peer."""

    peer: str
    code: int
    subcode: int
    data: bytes = b""
    direction: str = "receive"

    @property
    def message(self) -> str:
        """The data as text. For a shutdown communication (RFC 8203, Cease 6/2 and 6/4) ExaBGP
        5 has already decoded it to ``Shutdown Communication: "TEXT"``."""
        return self.data.decode("utf-8", "replace")


@dataclass(frozen=True, slots=True)
class GracefulRestart:
    """The peer's graceful-restart capability (RFC 4724)."""

    time: int  # seconds the peer asks us to keep its routes while it restarts
    restarting: bool = False  # R bit: the peer has just restarted
    families: tuple[Family, ...] = ()  # families listed in the capability
    forwarding: tuple[Family, ...] = ()  # of those, the ones whose forwarding state was kept (F bit)


@dataclass(frozen=True, slots=True)
class Open:
    """An OPEN message received from the peer (its capabilities)."""

    peer: str
    asn: int
    hold_time: int
    router_id: str
    families: tuple[Family, ...] = ()  # multiprotocol capabilities we handle
    graceful_restart: GracefulRestart | None = None
    route_refresh: bool = False
    four_byte_asn: bool = False
    capabilities: tuple[int, ...] = field(default=())  # every capability code, sorted


@dataclass(frozen=True, slots=True)
class Keepalive:
    """A KEEPALIVE received from the peer once its session is up. A peer that announced no
    graceful-restart capability sends no End-of-RIB: its first KEEPALIVE after the session came up
    follows its initial UPDATEs (implicit End-of-RIB, as FRR's update-delay takes it)."""

    peer: str


@dataclass(frozen=True, slots=True)
class RouteRefresh:
    """The peer asked us to re-send our routes of `family` (ExaBGP answers from its adj-RIB-out)."""

    peer: str
    family: Family | None
    subtype: str = "refresh"  # "refresh", "begin" or "end" (enhanced route refresh)


@dataclass(frozen=True, slots=True)
class Ack:
    """ExaBGP's answer to one command: ``done`` (ok) or ``error``. Acks may arrive out of order
    and ``done`` also answers commands that changed nothing."""

    ok: bool


class UpdateAction(str, enum.Enum):
    """What RFC 7606 prescribes for a malformed UPDATE (strongest last)."""

    ATTRIBUTE_DISCARD = "attribute-discard"  # the attribute dropped, the routes kept
    TREAT_AS_WITHDRAW = "treat-as-withdraw"  # every prefix the UPDATE announced is withdrawn
    SESSION_RESET = "session-reset"  # NOTIFICATION `code`/`subcode` (+ `data`) to the peer


@dataclass(frozen=True, slots=True)
class UpdateError:
    """The wire codec (`agent.speaker.wire`) found an UPDATE from `peer` malformed and applied
    `action`; `reason` says what was wrong. `code`/`subcode` are the RFC 4271 NOTIFICATION error
    (sent only for a session reset, with `data`); `family` is the family whose routes it concerned
    when that is one family, else None. For a treat-as-withdraw the `RouteUpdate` that follows
    already carries the withdrawals; for a session reset nothing of the UPDATE was used."""

    peer: str
    action: UpdateAction
    reason: str
    code: int = 3
    subcode: int = 0
    family: Family | None = None
    data: bytes = b""


@dataclass(frozen=True, slots=True)
class SpeakerShutdown:
    """ExaBGP said it is shutting down (its last message to the API helper)."""


@dataclass(frozen=True, slots=True)
class SpeakerRestarted:
    """A new ExaBGP is running after the previous one died: every route learned through the
    speaker before is stale until its peer re-sends it, and every advertisement must be sent
    again (the new ExaBGP starts empty). `restarts` counts the restarts since the supervisor
    started."""

    restarts: int
    reason: str = ""


Event = (
    RouteUpdate
    | EndOfRib
    | PeerState
    | Notification
    | Open
    | Keepalive
    | RouteRefresh
    | Ack
    | SpeakerShutdown
    | SpeakerRestarted
    | UpdateError
)


# ---------------------------------------------------------------------------------------------
# Commands to the speaker (what to announce, withdraw, tear down); the speaker adapter encodes them
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class Announce:
    """What an announcement carries besides its prefixes: the receiving peer (None: every
    established peer) and the path attributes. Keyword-only, after the prefix(es)."""

    next_hop: str = "self"
    peer: str | None = None
    local_pref: int | None = None
    med: int | None = None
    communities: tuple[str, ...] = ()
    large_communities: tuple[str, ...] = ()
    as_path: tuple[int, ...] = ()
    origin: BgpOrigin | None = None


@dataclass(frozen=True, slots=True)
class AnnounceRoute(Announce):
    """One prefix with its attributes."""

    prefix: Prefix | str


@dataclass(frozen=True, slots=True)
class AnnounceAttributes(Announce):
    """Many prefixes of one family sharing one set of attributes, as one command
    (``announce attributes ... nlri P1 P2 ...``): ExaBGP works through its API queue a bounded
    number of steps per loop, so one command per prefix caps announcements near 1,650/s."""

    prefixes: tuple[Prefix | str, ...]


@dataclass(frozen=True, slots=True)
class WithdrawAttributes:
    """Many prefixes of one family withdrawn with one command."""

    prefixes: tuple[Prefix | str, ...]
    peer: str | None = None


@dataclass(frozen=True, slots=True)
class WithdrawRoute:
    prefix: Prefix | str
    peer: str | None = None


@dataclass(frozen=True, slots=True)
class AnnounceEor:
    """End-of-RIB for `family` to `peer` (or all established peers): send it after the initial
    announcements, ExaBGP runs with ``manual-eor``."""

    family: Family
    peer: str | None = None


@dataclass(frozen=True, slots=True)
class Teardown:
    """Close the session with a Cease NOTIFICATION of `subcode` (1: maximum number of prefixes
    reached, 2: administrative shutdown, ...). ExaBGP 5.0.15 sends the NOTIFICATION only when
    graceful restart was not negotiated with the peer; with it, it closes the TCP session without
    one (the peer then keeps our routes as stale). Either way ExaBGP reconnects at once: keeping a
    session down takes holding the peer (`Speaker.set_peers(..., held=...)`)."""

    peer: str
    subcode: int = 2


@dataclass(frozen=True, slots=True)
class RequestRouteRefresh:
    """Ask `peer` (or all established peers) to re-send its routes of `family` (RFC 2918)."""

    family: Family
    peer: str | None = None


@dataclass(frozen=True, slots=True)
class SendNotification:
    """Send `peer` a NOTIFICATION (`code`, `subcode`, `data`) and close the session: the RFC 7606
    session reset of a malformed UPDATE (ExaBGP's ``neighbor PEER notify CODE SUBCODE [HEX]``,
    registered by the raw-UPDATE launcher)."""

    peer: str
    code: int
    subcode: int
    data: bytes = b""


Command = (AnnounceRoute | AnnounceAttributes | WithdrawRoute | WithdrawAttributes | AnnounceEor
           | Teardown | RequestRouteRefresh | SendNotification)
