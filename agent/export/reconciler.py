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
    Family,
    WithdrawAttributes,
    WithdrawRoute,
)
from .desired import Advert, AdvertAttrs

_FAMILIES = {4: Family.IPV4_UNICAST, 6: Family.IPV6_UNICAST}
GROUP = 500  # prefixes per announce/withdraw command


class ExportReconciler:
    def __init__(self) -> None:
        self.desired: dict[str, dict[Prefix, Advert]] = {}
        self.announced: dict[str, dict[Prefix, AdvertAttrs]] = {}
        self.local_as: dict[str, tuple[int, bool]] = {}  # peer -> (our AS, eBGP)
        self.up: set[str] = set()
        self.announces: Counter[str] = Counter()
        self.withdraws: Counter[str] = Counter()

    def configure(self, peer: str, local_as: int, ebgp: bool) -> None:
        self.local_as[peer] = (local_as, ebgp)

    def forget(self, peer: str) -> None:
        for d in (self.desired, self.announced, self.local_as):
            d.pop(peer, None)
        self.up.discard(peer)

    def _announce(self, peer: str, prefixes: list[Prefix], attrs: AdvertAttrs):
        """One command for prefixes of one family sharing `attrs` (grouped: ExaBGP's API takes
        a bounded number of commands per loop)."""
        local_as, ebgp = self.local_as.get(peer, (0, True))
        path = ()
        if attrs.prepend and ebgp:
            path = (local_as,) * (attrs.prepend + 1)  # ExaBGP adds none once a path is given
        self.announces[peer] += len(prefixes)
        fields = dict(next_hop=attrs.next_hop, peer=peer, local_pref=None if ebgp else attrs.local_pref,
                      med=attrs.med, communities=attrs.communities,
                      large_communities=attrs.large_communities, as_path=path)
        if len(prefixes) == 1:
            return AnnounceRoute(str(prefixes[0]), **fields)
        return AnnounceAttributes(tuple(str(p) for p in prefixes), **fields)

    def set_desired(self, peer: str, adverts: Mapping[Prefix, Advert]) -> list:
        self.desired[peer] = dict(adverts)
        if peer not in self.up:
            return []
        return self._diff(peer)

    def _diff(self, peer: str) -> list:
        want = self.desired.get(peer, {})
        have = self.announced.setdefault(peer, {})
        groups: dict[tuple[AdvertAttrs, int], list[Prefix]] = {}
        for prefix, advert in want.items():
            if have.get(prefix) != advert.attrs:
                groups.setdefault((advert.attrs, prefix.family), []).append(prefix)
                have[prefix] = advert.attrs
        gone: dict[int, list[Prefix]] = {}
        for prefix in [p for p in have if p not in want]:
            del have[prefix]
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
        self.announced[peer] = {}
        out = self._diff(peer)
        return out + [AnnounceEor(_FAMILIES[f], peer) for f in sorted(families)]

    def session_down(self, peer: str) -> None:
        self.up.discard(peer)

    def speaker_restarted(self) -> None:
        self.up.clear()
        self.announced.clear()
