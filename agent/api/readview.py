"""What the HTTP API, the metrics and the node status may read of a running agent: `ReadView`.

DOC: the API layer never sees the daemon's objects. The daemon hands `serve()` and
`Metrics.bind()` an object implementing this narrow, read-only protocol; every method returns
plain data (JSON-ready dicts or the small frozen counters below), computed between two steps of
the agent's core task (the API runs on the same event loop), so no caller can change routing state
or observe it half-updated. GoBGP's rule, carried over: the API reads state through server
methods, never by reaching into tables.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Protocol

from ..core.model import Origin, Prefix


@dataclass(frozen=True, slots=True)
class FibCounts:
    """Sizes of the FIB state: our routes in the kernel by family, and the ones not as wanted."""
    ipv4: int
    ipv6: int
    pending: int
    failed: int
    stale: int


@dataclass(frozen=True, slots=True)
class BgpCounts:
    """Per-peer BGP counters for the metrics; keys are peer addresses, families 4 or 6."""
    peers: tuple[str, ...]                       # configured peers, in configuration order
    sessions: Mapping[str, tuple[bool, int]]     # address -> (established, stale routes)
    received: Mapping[tuple[str, int], int]
    accepted: Mapping[tuple[str, int], int]
    rejected: Mapping[tuple[str, int, str], int]  # (address, family, reason) -> prefixes
    held: Mapping[tuple[str, int], int]          # currently accepted into the RIB
    installed: Mapping[tuple[str, int], int]     # winners in the kernel
    advertised: Mapping[tuple[str, int], int]    # desired advertisements
    announces: Mapping[str, int]
    withdraws: Mapping[str, int]
    updates: int
    speaker_restarts: int
    update_errors: Mapping[tuple[str, str], int] = field(default_factory=dict)  # (address, action) -> UPDATEs
    decoded_by: Mapping[str, int] = field(default_factory=dict)  # "relay"/"agent" -> UPDATE events
    decode_errors: int = 0  # lines from ExaBGP not understood
    bfd: "BfdCounts | None" = None


@dataclass(frozen=True, slots=True)
class BfdCounts:
    """BFD sessions (peers with BFD only), as the BFD process last reported them."""
    states: Mapping[str, str]                    # peer -> admindown/down/init/up
    packets: Mapping[tuple[str, str], int]       # (peer, "rx"/"tx"/"tx_error"/"drop:REASON"/"transition:STATE")
    failures: Mapping[str, int]                  # peer -> Up -> Down (routes withdrawn, session torn down)
    late_max_ms: float                           # worst lateness of a periodic transmission
    late_p99_ms: float | None                    # its 99th percentile (1 ms resolution)
    child_restarts: int


@dataclass(frozen=True, slots=True)
class ReflectorCounts:
    name: str
    synced: bool
    relists: int
    restarts: int
    events: int
    stalls: int = 0  # watches silent beyond the stall bound, abandoned and re-listed
    connected: bool = True  # the last list or watch answered, and the watch is not stalled
    last_error: str = ""
    silent_seconds: float = 0.0  # since the last byte from the API server on this resource
    stall_seconds: float = 0.0  # the current stall bound


@dataclass(frozen=True, slots=True)
class K8sCounts:
    reflectors: tuple[ReflectorCounts, ...]
    status_writes: int
    write_errors: int
    rejected_objects: int
    events_dropped: int = 0
    config_source: str = "live"  # "snapshot": running from the last-known-good snapshot
    snapshot_age: float | None = None  # seconds, while running from the snapshot
    warnings: tuple[str, ...] = ()  # configuration accepted but not applied as written
    node_missing: bool = False  # every Node is listed and this node's is not among them

    @property
    def connected(self) -> bool:
        """Every watch answers (the API server is reachable and not hung)."""
        return all(r.connected for r in self.reflectors)

    @property
    def last_error(self) -> str:
        return next((f"{r.name}: {r.last_error}" for r in self.reflectors
                     if not r.connected and r.last_error), "")


class ReadView(Protocol):
    """The agent as the API, the metrics and the status see it (read-only, plain data)."""

    def ready(self) -> bool:
        """True once the initial re-sync is done (/readyz)."""

    def rib_prefixes(self) -> list[Prefix]:
        """A copy of the RIB's prefixes, in no particular order (cheap: no decision is made)."""

    def rib_rows(self, prefixes: Iterable[Prefix]) -> list[dict]:
        """The rows of `show rib` for those of `prefixes` still in the RIB, in the given order."""

    def fib(self) -> dict:
        """The FIB view: table, protocol, gate, our routes, pending and failed writes."""

    def peers(self) -> list[dict]:
        """One row per configured BGP peer (empty without BGP)."""

    def adverts(self, peer: str | None) -> list[dict]:
        """What we advertise, to every peer or to one (address or BgpPeer name)."""

    def explain(self, prefix: Prefix, exact: bool = True) -> dict:
        """Why `prefix` is (not) installed: candidates, decision, kernel state, BGP verdicts;
        ``exact=False``: `prefix` is an address, explain its longest match (``ip route get``)."""

    def config_problems(self) -> list[str]:
        """The configuration problems that are not running (empty when all is accepted)."""

    def rib_counts(self) -> Mapping[Origin, int]:
        """Candidates in the RIB by origin."""

    def fib_counts(self) -> FibCounts: ...

    def bgp_counts(self) -> BgpCounts | None:
        """None without BGP peers."""

    def k8s_counts(self) -> K8sCounts | None:
        """None in standalone mode."""

    def readiness(self) -> list[tuple[str, bool, str]]:
        """(check, ok, detail) behind /readyz: the first decides readiness, the others inform."""
