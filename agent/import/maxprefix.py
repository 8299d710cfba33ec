"""Max-prefix: per peer and family, how many accepted prefixes a peer may hold, and what then.

DOC: ExaBGP has no max-prefix, so the agent counts. What is counted is the number of prefixes
the peer currently has **accepted** (after the guard and the import policy), as FRR does: a
filtered full table from a peer is fine, and routes the guard or the policy throws away cost
nothing downstream. Re-announcing a prefix that is already accepted does not count again;
withdrawing it (or a re-announcement that is now rejected) gives its slot back (`release`).
The import stage calls `admit` for each prefix that becomes accepted and acts on the answer:

* `MaxPrefixDecision.OK`: accept.
* `WARN`: accept, and log a warning: returned once when the count first goes over the limit with
  action ``warn``; re-armed when the count is back at or under the limit, and on session down.
* `DISCARD`: do not accept this prefix (the count stays at the limit): action ``discardExtra``,
  or any action once the session is being torn down. Prefixes already accepted stay; a slot
  freed by a withdrawal is used by the next new prefix (a discarded prefix comes back only when
  the peer re-sends it, e.g. after a route refresh).
* `TEARDOWN`: action ``teardown``: send NOTIFICATION Cease (6) / Maximum Number of Prefixes
  Reached (1) now (ExaBGP: ``neighbor IP teardown 1``); returned once, and every later prefix of
  that peer (any family) is `DISCARD`ed until the session is down.

`session_down(peer, now)` resets the peer's counts and states (call it on every session down,
graceful restart or not: the peer re-sends everything on the new session). After a teardown it
also starts the hold-down: `may_connect(peer, now)` is False until ``restart_seconds`` have
passed, or forever when ``restart_seconds`` is None (until an operator calls `clear`), as FRR's
``maximum-prefix N restart M``: the restart delay runs from the session down (not from the
teardown), and `hold_until` is that deadline, the only one: whoever restores the session sleeps
until it. Time is passed in (monotonic seconds), so this module is pure.

The limit is "at most N prefixes": the (N+1)-th triggers the action. Changing a limit takes
effect at the next `admit`, it does not act on prefixes already held.
"""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass

CEASE = 6
CEASE_MAX_PREFIXES = 1  # RFC 4486 subcode: Maximum Number of Prefixes Reached


class MaxPrefixAction(str, enum.Enum):
    """What to do when a peer goes over its limit (configuration values)."""

    WARN = "warn"
    DISCARD_EXTRA = "discardExtra"
    TEARDOWN = "teardown"


class MaxPrefixDecision(str, enum.Enum):
    """What the agent must do with one newly accepted prefix."""

    OK = "ok"
    WARN = "warn"  # accept, log once
    DISCARD = "discard"  # do not accept this prefix
    TEARDOWN = "teardown"  # do not accept it, and send Cease 6/1 now


class MaxPrefixState(str, enum.Enum):
    OK = "ok"
    OVER_LIMIT = "over-limit"  # action warn, count above the limit
    DISCARDING = "discarding"  # action discardExtra, at least one prefix discarded this session
    TORN_DOWN = "torn-down"  # teardown sent, waiting for the session to go down
    HELD_DOWN = "held-down"  # session down after a teardown, restart delay not over


# Members as module constants: attribute access on an Enum class costs a Python-level descriptor
# call in 3.11, and admit() runs once per accepted prefix.
_OK, _WARN, _DISCARD, _TEARDOWN = (MaxPrefixDecision.OK, MaxPrefixDecision.WARN,
                                   MaxPrefixDecision.DISCARD, MaxPrefixDecision.TEARDOWN)
_A_WARN, _A_DISCARD = MaxPrefixAction.WARN, MaxPrefixAction.DISCARD_EXTRA
UNLIMITED = 1 << 62  # `room` without a limit


@dataclass(frozen=True, slots=True)
class MaxPrefixLimit:
    """One family's limit for one peer."""

    limit: int
    action: MaxPrefixAction = MaxPrefixAction.TEARDOWN
    restart_seconds: float | None = None  # after a teardown; None: stay down until `clear`

    def __post_init__(self) -> None:
        if self.limit < 0:
            raise ValueError("max-prefix limit must be >= 0")


@dataclass(frozen=True, slots=True)
class MaxPrefixStatus:
    """For ``show peers`` and metrics."""

    count: int
    limit: MaxPrefixLimit | None
    state: MaxPrefixState
    discarded: int  # prefixes discarded this session
    restart_at: float | None  # hold-down end (monotonic), math.inf: until cleared


class _Family:
    __slots__ = ("limit", "count", "warned", "discarded")

    def __init__(self, limit: MaxPrefixLimit | None) -> None:
        self.limit = limit
        self.count = 0
        self.warned = False
        self.discarded = 0


class MaxPrefix:
    """Counters and decisions for every peer and family (one owner: the import stage)."""

    __slots__ = ("_families", "_torn", "_hold")

    def __init__(self) -> None:
        self._families: dict[tuple[str, int], _Family] = {}
        self._torn: dict[str, float | None] = {}  # peer -> restart_seconds of the teardown
        self._hold: dict[str, float] = {}  # peer -> may reconnect at (monotonic)

    def configure(self, peer: str, family: int, limit: MaxPrefixLimit | None) -> None:
        """Set or remove (None) the limit of one peer and family; counts are kept."""
        fam = self._families.get((peer, family))
        if fam is None:
            self._families[(peer, family)] = _Family(limit)
        else:
            fam.limit = limit

    def forget(self, peer: str) -> None:
        """The peer is removed from the configuration."""
        for key in [k for k in self._families if k[0] == peer]:
            del self._families[key]
        self._torn.pop(peer, None)
        self._hold.pop(peer, None)

    def admit(self, peer: str, family: int) -> MaxPrefixDecision:
        """A prefix of `peer` is about to become accepted: may it?"""
        if peer in self._torn:
            fam = self._families.get((peer, family))
            if fam is not None:
                fam.discarded += 1
            return _DISCARD
        fam = self._families.get((peer, family))
        if fam is None:
            fam = self._families[(peer, family)] = _Family(None)
        limit = fam.limit
        if limit is None or fam.count < limit.limit:
            fam.count += 1
            return _OK
        action = limit.action
        if action is _A_WARN:
            fam.count += 1
            if fam.warned:
                return _OK
            fam.warned = True
            return _WARN
        fam.discarded += 1
        if action is _A_DISCARD:
            return _DISCARD
        self._torn[peer] = limit.restart_seconds
        return _TEARDOWN

    def room(self, peer: str, family: int) -> int:
        """How many prefixes `admit` would take now, one after the other, each with OK and
        nothing else changing (the limit not reached, no teardown): the caller may count them
        itself and hand the number to `add` (a batch of an UPDATE's prefixes)."""
        if peer in self._torn:
            return 0
        fam = self._families.get((peer, family))
        if fam is None or fam.limit is None:
            return UNLIMITED
        return max(0, fam.limit.limit - fam.count)

    def add(self, peer: str, family: int, n: int) -> None:
        """`n` prefixes admitted within `room` (as `n` calls of `admit`, all OK)."""
        if n:
            fam = self._families.get((peer, family))
            if fam is None:
                fam = self._families[(peer, family)] = _Family(None)
            fam.count += n

    def release(self, peer: str, family: int) -> None:
        """An accepted prefix of `peer` is gone (withdrawn, or now rejected)."""
        fam = self._families.get((peer, family))
        if fam is None or fam.count == 0:
            return
        fam.count -= 1
        if fam.warned and fam.limit is not None and fam.count <= fam.limit.limit:
            fam.warned = False

    def session_down(self, peer: str, now: float) -> None:
        """The session is down: counts and states reset; a teardown starts its hold-down."""
        for (p, _), fam in self._families.items():
            if p == peer:
                fam.count = 0
                fam.warned = False
                fam.discarded = 0
        if peer in self._torn:
            delay = self._torn.pop(peer)
            self._hold[peer] = math.inf if delay is None else now + delay

    def hold_until(self, peer: str) -> float | None:
        """When the hold-down of `peer` ends (monotonic; math.inf: until `clear`); None when the
        peer is not held down (also while a teardown waits for the session to go down). The one
        deadline: the restore timer sleeps until it, and checks `may_connect` again when woken
        early (a later teardown, a clock step), never on its own count of ``restart_seconds``."""
        return self._hold.get(peer)

    def may_connect(self, peer: str, now: float) -> bool:
        """False while a max-prefix teardown holds the session down."""
        until = self._hold.get(peer)
        if until is None:
            return True
        if now >= until:
            del self._hold[peer]
            return True
        return False

    def clear(self, peer: str) -> None:
        """Operator action: lift a hold-down (and a pending teardown state)."""
        self._hold.pop(peer, None)
        self._torn.pop(peer, None)

    def count(self, peer: str, family: int) -> int:
        fam = self._families.get((peer, family))
        return 0 if fam is None else fam.count

    def status(self, peer: str, family: int) -> MaxPrefixStatus:
        fam = self._families.get((peer, family)) or _Family(None)
        if peer in self._torn:
            state = MaxPrefixState.TORN_DOWN
        elif peer in self._hold:
            state = MaxPrefixState.HELD_DOWN
        elif fam.discarded:
            state = MaxPrefixState.DISCARDING
        elif fam.limit is not None and fam.count > fam.limit.limit:
            state = MaxPrefixState.OVER_LIMIT
        else:
            state = MaxPrefixState.OK
        return MaxPrefixStatus(fam.count, fam.limit, state, fam.discarded, self._hold.get(peer))
