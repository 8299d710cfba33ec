"""Speaker reconciler: per peer, what we want announced vs what ExaBGP was told; only the difference.

DOC: pure logic; it returns speaker commands and never waits for ExaBGP (the speaker queues them
without blocking, so a slow or dead ExaBGP loses nothing we want: the desired state stays here).

* `set_desired(peer, adverts)`: the new desired set; for a peer whose session is up, the
  announce / withdraw commands for the differences (an attribute change is a re-announce).
  Prefixes of one family sharing their attributes go out as one command of up to 500 prefixes
  (ExaBGP handles a bounded number of API commands per loop: one per prefix caps it near
  1,650 prefixes/s).
* `session_up(peer)`: everything desired for the peer, then End-of-RIB for each of its families
  (ExaBGP runs with ``manual-eor``), so a graceful-restart peer that kept our routes as stale sees
  them refreshed and nothing withdrawn.
* `speaker_restarted()`: the new ExaBGP knows nothing; every up session is re-announced when it
  comes up again.

What ExaBGP was told (`sent`, the base of the differences) is not what it accepted: every command
is answered ``done`` or ``error`` (`acked(command, ok)`, from the speaker's `CommandAck`). Until
its answer, a prefix is in flight; `announced(peer, prefix)` gives its attributes only once ExaBGP
has answered ``done`` for the last command that carried it, so the views say what ExaBGP took. On
``error`` the command is undone in `sent` (unless a later command for the prefix replaced it,
what ExaBGP holds for the prefix is now unknown: not announced, as far as the views go) and
counted (`refused`), so the next reconcile of that peer (`set_desired`, `session_up`) announces
the prefix again if it is desired and withdraws it if not; nothing is resent on the spot, since
ExaBGP would refuse the same command the same way. Commands the speaker dropped at its queue bound
(`dropped_commands(commands)`) are undone the same way; `replan()`, called once the speaker's queue
has drained, gives the commands that bring ExaBGP to the desired state, End-of-RIB included when
one was dropped (after the routes, as on session up).

Counters `announces` / `withdraws` per peer are exported as metrics.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping

from ..core.model import Prefix
from ..core.bgp import (
    AnnounceAttributes,
    AnnounceEor,
    AnnounceRoute,
    Command,
    Family,
    WithdrawAttributes,
    WithdrawRoute,
)
from .desired import Advert, AdvertAttrs

_FAMILIES = {4: Family.IPV4_UNICAST, 6: Family.IPV6_UNICAST}
GROUP = 500  # prefixes per announce/withdraw command
_ANNOUNCES = (AnnounceRoute, AnnounceAttributes)
_WITHDRAWS = (WithdrawRoute, WithdrawAttributes)
_FIELDS = ("next_hop", "local_pref", "med", "communities", "large_communities", "as_path")
UNKNOWN = AdvertAttrs(next_hop="")  # what ExaBGP holds is unknown: a command for it was refused or dropped


def _prefixes(command) -> tuple[Prefix, ...]:
    if isinstance(command, (AnnounceRoute, WithdrawRoute)):
        return (Prefix.parse(str(command.prefix)),)
    return tuple(Prefix.parse(str(p)) for p in command.prefixes)


class ExportReconciler:
    def __init__(self) -> None:
        self.desired: dict[str, dict[Prefix, Advert]] = {}
        self.sent: dict[str, dict[Prefix, AdvertAttrs]] = {}  # what ExaBGP was told
        self.in_flight: dict[str, Counter[Prefix]] = {}  # commands not answered yet, per prefix
        self.local_as: dict[str, tuple[int, bool]] = {}  # peer -> (our AS, eBGP)
        self.up: set[str] = set()
        self.announces: Counter[str] = Counter()
        self.withdraws: Counter[str] = Counter()
        self.refused: Counter[str] = Counter()  # prefixes in commands ExaBGP answered "error"
        self.dropped: Counter[str] = Counter()  # prefixes in commands dropped by the speaker
        self._replan: dict[str, set[Family]] = {}  # peer -> End-of-RIBs dropped, after a drop

    def configure(self, peer: str, local_as: int, ebgp: bool) -> None:
        self.local_as[peer] = (local_as, ebgp)

    def forget(self, peer: str) -> None:
        for d in (self.desired, self.sent, self.in_flight, self.local_as):
            d.pop(peer, None)
        self.up.discard(peer)

    def announced(self, peer: str, prefix: Prefix) -> AdvertAttrs | None:
        """The attributes ExaBGP accepted for `prefix` to `peer`; None while a command for it is
        unanswered, after an ``error``, or when it is not announced."""
        if self.in_flight.get(peer, {}).get(prefix):
            return None
        attrs = self.sent.get(peer, {}).get(prefix)
        return None if attrs is UNKNOWN else attrs

    def _fields(self, peer: str, attrs: AdvertAttrs) -> dict:
        local_as, ebgp = self.local_as.get(peer, (0, True))
        path = ()
        if attrs.prepend and ebgp:
            path = (local_as,) * (attrs.prepend + 1)  # ExaBGP adds none once a path is given
        return dict(next_hop=attrs.next_hop, local_pref=None if ebgp else attrs.local_pref,
                    med=attrs.med, communities=attrs.communities,
                    large_communities=attrs.large_communities, as_path=path)

    def _announce(self, peer: str, prefixes: list[Prefix], attrs: AdvertAttrs):
        """One command for prefixes of one family sharing `attrs` (grouped: ExaBGP's API takes
        a bounded number of commands per loop)."""
        self.announces[peer] += len(prefixes)
        fields = self._fields(peer, attrs)
        if len(prefixes) == 1:
            return AnnounceRoute(str(prefixes[0]), peer=peer, **fields)
        return AnnounceAttributes(tuple(str(p) for p in prefixes), peer=peer, **fields)

    def set_desired(self, peer: str, adverts: Mapping[Prefix, Advert]) -> list:
        self.desired[peer] = dict(adverts)
        if peer not in self.up:
            return []
        return self._diff(peer)

    def _diff(self, peer: str) -> list:
        want = self.desired.get(peer, {})
        have = self.sent.setdefault(peer, {})
        flying = self.in_flight.setdefault(peer, Counter())
        groups: dict[tuple[AdvertAttrs, int], list[Prefix]] = {}
        for prefix, advert in want.items():
            if have.get(prefix) != advert.attrs:
                groups.setdefault((advert.attrs, prefix.family), []).append(prefix)
                have[prefix] = advert.attrs
                flying[prefix] += 1
        gone: dict[int, list[Prefix]] = {}
        for prefix in [p for p in have if p not in want]:
            del have[prefix]
            flying[prefix] += 1
            gone.setdefault(prefix.family, []).append(prefix)
        out = []
        for (attrs, _family), prefixes in groups.items():
            for i in range(0, len(prefixes), GROUP):
                out.append(self._announce(peer, prefixes[i:i + GROUP], attrs))
        for prefixes in gone.values():
            self.withdraws[peer] += len(prefixes)
            for i in range(0, len(prefixes), GROUP):
                chunk = prefixes[i:i + GROUP]
                out.append(WithdrawRoute(str(chunk[0]), peer=peer) if len(chunk) == 1
                           else WithdrawAttributes(tuple(str(p) for p in chunk), peer=peer))
        return out

    def session_up(self, peer: str, families: Iterable[int]) -> list:
        self.up.add(peer)
        self.sent[peer] = {}
        out = self._diff(peer)
        return out + [AnnounceEor(_FAMILIES[f], peer) for f in sorted(families)]

    def session_down(self, peer: str) -> None:
        self.up.discard(peer)

    def speaker_restarted(self) -> None:
        self.up.clear()
        self.sent.clear()
        self.in_flight.clear()  # their answers died with the old ExaBGP
        self._replan.clear()  # every session is announced in full when it comes up again

    # ---- what ExaBGP made of the commands ----
    def acked(self, command: Command | str, ok: bool) -> None:
        """ExaBGP's answer to one of our commands (others are ignored)."""
        if not isinstance(command, (*_ANNOUNCES, *_WITHDRAWS)) or command.peer not in self.sent:
            return
        prefixes = self._settle(command)
        if not ok:
            self.refused[command.peer] += len(prefixes)
            self._undo(command, prefixes)

    def dropped_commands(self, commands: Iterable[Command | str]) -> None:
        """The speaker dropped `commands` before ExaBGP saw them: undo them; `replan()` later
        (once the speaker's queue has drained) gives what brings ExaBGP to the desired state."""
        for command in commands:
            if isinstance(command, AnnounceEor) and command.peer is not None:
                self._replan.setdefault(command.peer, set()).add(command.family)
            elif isinstance(command, (*_ANNOUNCES, *_WITHDRAWS)) and command.peer in self.sent:
                prefixes = self._settle(command)
                self.dropped[command.peer] += len(prefixes)
                self._undo(command, prefixes)
                self._replan.setdefault(command.peer, set())

    def replan(self) -> list:
        """The commands for what `dropped_commands` undid, for the peers still up: the differences,
        then the End-of-RIBs that were dropped."""
        out = []
        for peer, eors in self._replan.items():
            if peer in self.up:
                out += self._diff(peer)
                out += [AnnounceEor(f, peer) for f in sorted(eors, key=lambda f: f.ip_version)]
        self._replan.clear()
        return out

    def _settle(self, command) -> tuple[Prefix, ...]:
        """The command is answered (or will never be): its prefixes are no longer in flight."""
        prefixes = _prefixes(command)
        flying = self.in_flight.get(command.peer)
        if flying is not None:
            for prefix in prefixes:
                n = flying.get(prefix, 0)
                if n > 1:
                    flying[prefix] = n - 1
                elif n:
                    del flying[prefix]
        return prefixes

    def _undo(self, command, prefixes: tuple[Prefix, ...]) -> None:
        """ExaBGP did not take `command`: unless a later command for the same prefix replaced it,
        what ExaBGP has for the prefix is unknown (an older announcement, or nothing), so the next
        reconcile announces it again if it is desired and withdraws it if not."""
        have = self.sent[command.peer]
        if isinstance(command, _WITHDRAWS):
            for prefix in prefixes:
                if prefix not in have:
                    have[prefix] = UNKNOWN
            return
        fields = {k: getattr(command, k) for k in _FIELDS}
        for prefix in prefixes:
            attrs = have.get(prefix)
            if attrs is not None and attrs is not UNKNOWN and self._fields(command.peer, attrs) == fields:
                have[prefix] = UNKNOWN
