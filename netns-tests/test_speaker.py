"""The speaker adapter against a real BIRD 2: real ExaBGP child, real sessions, in namespaces.

Two namespaces joined by a veth pair: BIRD in one (10.99.0.1, 10.99.0.3, fd99::1), ExaBGP in the
other (10.99.0.2, 10.99.0.4, fd99::2), started by the `Speaker` under ``ip netns exec``. BIRD has
its own generated configuration and control socket. Every wait polls with a deadline.
"""

from __future__ import annotations

import asyncio
import re
import time

import pytest

from testlab.netns import ip, namespace
from agent.config.bgp import BgpPeer, BgpSpeakerSpec
from agent.core.bgp import (
    AnnounceEor,
    AnnounceRoute,
    EndOfRib,
    Family,
    Notification,
    PeerState,
    PeerStatus,
    RequestRouteRefresh,
    RouteRefresh,
    RouteUpdate,
    SpeakerRestarted,
    Teardown,
    WithdrawRoute,
)
from agent.core.model import as_prefix
from agent.speaker.process import Speaker
from testlab.bird import Bird, base_config, bgp_protocol

V4 = ["192.0.2.0/24", "198.51.100.0/24"]
V6 = ["2001:db8:1::/48", "2001:db8:2::/48"]
E4_EXPORT = ("if net = 192.0.2.0/24 then { bgp_community.add((65000,100)); "
             "bgp_large_community.add((65000,1,2)); bgp_med = 50; }")


class Lab:
    def __init__(self, nb: str, ne: str, tmp) -> None:
        self.nb, self.ne, self.tmp = nb, ne, tmp
        self.events: list = []
        self.birds: list[Bird] = []
        self.speaker: Speaker | None = None
        self._collector: asyncio.Task | None = None

    def bird(self, config: str, name: str = "bird") -> Bird:
        b = Bird(self.nb, self.tmp / name, config)
        self.birds.append(b)
        return b

    async def speaker_for(self, *peers: BgpPeer) -> Speaker:
        sp = Speaker(peers, BgpSpeakerSpec(listenAddresses=["10.99.0.2", "10.99.0.4", "fd99::2"]),
                     runtime_dir=self.tmp / "rt", wrapper=("ip", "netns", "exec", self.ne),
                     backoff_min=0.2, backoff_max=1.0)
        await sp.start()
        self.speaker = sp

        async def collect():
            async for ev in sp.events():
                self.events.append(ev)

        self._collector = asyncio.create_task(collect())
        await sp.wait_running(30)
        return sp

    async def wait(self, pred, timeout: float = 15.0, what: str = "", start: int = 0):
        """The first event (from index `start`) matching `pred`; polls until the deadline."""
        deadline = time.monotonic() + timeout
        while True:
            for ev in self.events[start:]:
                if pred(ev):
                    return ev
            if time.monotonic() > deadline:
                raise TimeoutError(f"no event {what or pred} within {timeout}s; got:\n"
                                   + "\n".join(map(repr, self.events[-30:])))
            await asyncio.sleep(0.02)

    async def wait_for(self, cond, timeout: float = 15.0, what: str = ""):
        deadline = time.monotonic() + timeout
        while True:
            value = cond()
            if value:
                return value
            if time.monotonic() > deadline:
                raise TimeoutError(f"timed out waiting for {what or cond}")
            await asyncio.sleep(0.05)

    def prefixes(self, peer: str, family: Family) -> set[str]:
        """Prefixes currently announced by `peer` according to the events so far."""
        table: set[str] = set()
        for ev in self.events:
            if isinstance(ev, RouteUpdate) and ev.peer == peer and ev.family is family:
                table.difference_update(str(p) for p in ev.withdrawn)
                table.update(str(as_prefix(a.prefix)) for a in ev.announced)
            elif isinstance(ev, SpeakerRestarted):
                table.clear()
        return table

    async def close(self) -> None:
        if self.speaker is not None:
            await self.speaker.stop()
        if self._collector is not None:
            await asyncio.wait_for(self._collector, 5)
        for b in self.birds:
            b.close()


@pytest.fixture
async def lab(tmp_path):
    with namespace("ra-spb-") as nb, namespace("ra-spe-") as ne:
        ip(nb, "link", "add", "eb", "type", "veth", "peer", "name", "ee", "netns", ne)
        for addr in ("10.99.0.1/24", "10.99.0.3/24", "fd99::1/64"):
            ip(nb, "addr", "add", addr, "dev", "eb", *(("nodad",) if ":" in addr else ()))
        for addr in ("10.99.0.2/24", "10.99.0.4/24", "fd99::2/64"):
            ip(ne, "addr", "add", addr, "dev", "ee", *(("nodad",) if ":" in addr else ()))
        ip(nb, "link", "set", "eb", "up")
        ip(ne, "link", "set", "ee", "up")
        lab = Lab(nb, ne, tmp_path)
        try:
            yield lab
        finally:
            await lab.close()


def peer(name: str, address: str, asn: int = 65000, **spec) -> BgpPeer:
    local = {"10.99.0.1": "10.99.0.2", "10.99.0.3": "10.99.0.4", "fd99::1": "fd99::2"}[address]
    return BgpPeer.model_validate({"metadata": {"name": name}, "spec": {
        "peerAddress": address, "peerAS": asn, "localAS": 65001, "routerId": "10.99.0.2",
        "localAddress": local, "holdTime": 9, **spec}})


def bird_conf(static4=V4, static6=V6, **kw) -> str:
    protocols = kw.pop("protocols", None)
    if protocols is None:
        protocols = [
            bgp_protocol("e4", local="10.99.0.1", local_as=65000, neighbor="10.99.0.2", neighbor_as=65001,
                         export={4: E4_EXPORT}),
            bgp_protocol("e6", local="fd99::1", local_as=65000, neighbor="fd99::2", neighbor_as=65001,
                         families=(6,), export={6: ""}),
        ]
    return base_config("10.99.0.1", static4, static6) + "\n".join(protocols)


def is_state(peer, state):
    return lambda e: isinstance(e, PeerState) and e.peer == peer and e.state is state


def is_eor(peer, family):
    return lambda e: isinstance(e, EndOfRib) and e.peer == peer and e.family is family


async def test_routes_v4_v6_eor_withdraw_and_down(lab):
    bird = lab.bird(bird_conf())
    await lab.speaker_for(peer("e4", "10.99.0.1"), peer("e6", "fd99::1", families=["ipv6-unicast"]))
    await lab.wait(is_state("10.99.0.1", PeerStatus.UP), what="e4 up")
    await lab.wait(is_eor("10.99.0.1", Family.IPV4_UNICAST), what="v4 EoR")
    await lab.wait(is_eor("fd99::1", Family.IPV6_UNICAST), what="v6 EoR")
    assert lab.prefixes("10.99.0.1", Family.IPV4_UNICAST) == set(V4)
    assert lab.prefixes("fd99::1", Family.IPV6_UNICAST) == set(V6)
    upd = next(e for e in lab.events if isinstance(e, RouteUpdate)
               and any(str(as_prefix(a.prefix)) == "192.0.2.0/24" for a in e.announced))
    (a,) = [a for a in upd.announced if str(as_prefix(a.prefix)) == "192.0.2.0/24"]
    assert (a.next_hop, a.attrs.as_path, a.attrs.med) == ("10.99.0.1", (65000,), 50)
    assert (a.attrs.communities, a.attrs.large_communities) == (("65000:100",), ("65000:1:2",))
    v6 = next(e for e in lab.events if isinstance(e, RouteUpdate) and e.family is Family.IPV6_UNICAST)
    for a in v6.announced:  # one route per prefix: global next hop, link-local kept aside
        assert a.next_hop == "fd99::1" and a.link_local and a.link_local.startswith("fe80:")

    # withdraws: BIRD drops one route of each family
    start = len(lab.events)
    bird.reconfigure(bird_conf(V4[:1], V6[:1]))
    await lab.wait_for(lambda: lab.prefixes("10.99.0.1", Family.IPV4_UNICAST) == {V4[0]}, what="v4 withdraw")
    await lab.wait_for(lambda: lab.prefixes("fd99::1", Family.IPV6_UNICAST) == {V6[0]}, what="v6 withdraw")
    w = await lab.wait(lambda e: isinstance(e, RouteUpdate) and e.withdrawn, start=start)
    assert not w.announced

    # BIRD disables the protocol: a Cease NOTIFICATION, then the session goes down
    start = len(lab.events)
    bird.cmd("disable", "e4")
    n = await lab.wait(lambda e: isinstance(e, Notification), start=start, what="notification")
    assert (n.peer, n.code, n.subcode) == ("10.99.0.1", 6, 2)
    down = await lab.wait(is_state("10.99.0.1", PeerStatus.DOWN), start=start, what="e4 down")
    assert "notification" in down.reason
    assert lab.speaker.peer_states["fd99::1"] is PeerStatus.UP


async def test_announce_with_attributes_shows_in_bird_then_withdraw(lab):
    bird = lab.bird(bird_conf(protocols=[
        bgp_protocol("e4", local="10.99.0.1", local_as=65000, neighbor="10.99.0.2", neighbor_as=65001),
        bgp_protocol("e6", local="fd99::1", local_as=65000, neighbor="fd99::2", neighbor_as=65001,
                     families=(6,)),
    ]))
    sp = await lab.speaker_for(peer("e4", "10.99.0.1"), peer("e6", "fd99::1", families=["ipv6-unicast"]))
    await lab.wait(is_state("10.99.0.1", PeerStatus.UP), what="up")
    await lab.wait(is_state("fd99::1", PeerStatus.UP), what="v6 up")
    sp.send(AnnounceRoute("203.0.113.0/24", peer="10.99.0.1", med=42, as_path=(65001, 64999),
                          communities=("65001:7", "65001:8"), large_communities=("65001:1:2",)))
    sp.send(AnnounceRoute("203.0.113.128/25", next_hop="10.99.0.4", peer="10.99.0.1"))
    sp.send(AnnounceRoute("2001:db8:99::/48", peer="fd99::1", local_pref=300,
                          large_communities=("4200000000:1:2",)))
    sp.send(AnnounceEor(Family.IPV4_UNICAST, peer="10.99.0.1"))

    def route_block(prefix, table="master4", needle="BGP."):
        out = bird.cmd("show", "route", "all", prefix, "table", table, check=False)
        return out if needle in out else None

    out = await lab.wait_for(lambda: route_block("203.0.113.0/24", needle="BGP.med"), what="route in BIRD")
    assert re.search(r"203\.0\.113\.0/24\s+unicast \[e4 .*\] \* \(100\) \[AS64999i\]", out), out
    assert "via 10.99.0.2 on eb" in out
    assert re.search(r"BGP\.as_path: 65001 64999\n", out), out
    assert re.search(r"BGP\.med: 42\n", out), out
    assert re.search(r"BGP\.community: \(65001,7\) \(65001,8\)\n", out), out
    assert re.search(r"BGP\.large_community: \(65001, 1, 2\)\n", out), out
    more = await lab.wait_for(lambda: route_block("203.0.113.128/25"), what="second route")
    assert "via 10.99.0.4 on eb" in more and "BGP.next_hop: 10.99.0.4" in more, more
    v6 = await lab.wait_for(lambda: route_block("2001:db8:99::/48", "master6"), what="v6 route")
    assert "via fd99::2 on eb" in v6 and "BGP.large_community: (4200000000, 1, 2)" in v6, v6
    assert "BGP.local_pref: 300" not in v6  # eBGP: ExaBGP does not send local-pref
    await lab.wait_for(lambda: sp.acks[True] >= 4, what="acks")
    assert not sp.acks[False]

    sp.send(WithdrawRoute("203.0.113.0/24", peer="10.99.0.1"))
    sp.send(WithdrawRoute("2001:db8:99::/48", peer="fd99::1"))
    await lab.wait_for(lambda: "203.0.113.0/24" not in bird.cmd("show", "route", "table", "master4"),
                       what="withdrawn from BIRD")
    await lab.wait_for(lambda: "2001:db8:99::/48" not in bird.cmd("show", "route", "table", "master6"),
                       what="v6 withdrawn from BIRD")

    # route refresh: BIRD sends its table again; teardown with Cease 6/1 (max prefix)
    start = len(lab.events)
    sp.send(RequestRouteRefresh(Family.IPV4_UNICAST, peer="10.99.0.1"))
    await lab.wait(lambda e: isinstance(e, RouteRefresh) and e.peer == "10.99.0.1" and e.subtype == "end",
                   start=start, what="BIRD's end of route refresh")
    # graceful restart is negotiated, and still the Cease goes out (ExaBGP 5.0.15 alone closed
    # silently: the launcher's teardown patch): BIRD does not take it for a restart
    sp.send(Teardown("10.99.0.1", 1))
    await lab.wait(is_state("10.99.0.1", PeerStatus.DOWN), start=start, what="torn down")
    await lab.wait_for(lambda: re.search(r"e4: Received: Maximum number of prefixes reached", bird.log.read_text()),
                       what="BIRD got the Cease 6/1")
    assert "e4: Neighbor graceful restart detected" not in bird.log.read_text()
    assert lab.speaker.peer_states["fd99::1"] is PeerStatus.UP


async def test_set_peers_adds_a_session_without_touching_the_others(lab):
    lab.bird(bird_conf(protocols=[
        bgp_protocol("e4", local="10.99.0.1", local_as=65000, neighbor="10.99.0.2", neighbor_as=65001,
                     export={4: ""}),
        bgp_protocol("i4", local="10.99.0.3", local_as=65001, neighbor="10.99.0.4", neighbor_as=65001,
                     export={4: "bgp_local_pref = 250;"}, extra="    direct;"),
    ]))
    first = peer("e4", "10.99.0.1")
    sp = await lab.speaker_for(first)
    await lab.wait(is_eor("10.99.0.1", Family.IPV4_UNICAST), what="e4 routes")
    start = len(lab.events)
    await sp.set_peers([first, peer("i4", "10.99.0.3", asn=65001)])
    await lab.wait(is_eor("10.99.0.3", Family.IPV4_UNICAST), start=start, what="i4 routes")
    lp = {a.attrs.local_pref for e in lab.events[start:] if isinstance(e, RouteUpdate) and e.peer == "10.99.0.3"
          for a in e.announced}
    assert lp == {250}
    assert not any(isinstance(e, PeerState) and e.peer == "10.99.0.1" for e in lab.events[start:])
    assert sp.restarts == 0


async def test_sigkill_restarts_exabgp_and_session_comes_back(lab):
    bird = lab.bird(bird_conf())
    sp = await lab.speaker_for(peer("e4", "10.99.0.1"))
    await lab.wait(is_eor("10.99.0.1", Family.IPV4_UNICAST), what="first EoR")
    sp.send(AnnounceRoute("203.0.113.0/24", peer="10.99.0.1"))
    await lab.wait_for(lambda: "203.0.113.0/24" in bird.cmd("show", "route", "table", "master4"),
                       what="our route in BIRD")
    old_pid = sp.pid
    start = len(lab.events)
    sp.kill()  # SIGKILL: no NOTIFICATION, the peer keeps our route as stale (graceful restart)
    down = await lab.wait(is_state("10.99.0.1", PeerStatus.DOWN), start=start, what="synthetic down")
    assert down.reason.startswith("speaker exited with signal SIGKILL")
    restarted = await lab.wait(lambda e: isinstance(e, SpeakerRestarted), start=start, what="restart")
    assert restarted.restarts == 1 and sp.restarts == 1 and sp.pid != old_pid
    assert "203.0.113.0/24" in bird.cmd("show", "route", "table", "master4")  # kept as stale
    assert "Neighbor graceful restart active" in bird.cmd("show", "protocols", "all", "e4")
    # the agent's part after a restart: announce again, then End-of-RIB
    sp.send(AnnounceRoute("203.0.113.0/24", peer="10.99.0.1"))
    await lab.wait(is_state("10.99.0.1", PeerStatus.UP), start=start, what="up again", timeout=20)
    sp.send(AnnounceEor(Family.IPV4_UNICAST, peer="10.99.0.1"))
    await lab.wait(is_eor("10.99.0.1", Family.IPV4_UNICAST), start=start, what="EoR again")
    assert lab.prefixes("10.99.0.1", Family.IPV4_UNICAST) == set(V4)
    # our End-of-RIB ends BIRD's graceful-restart period; the route, announced again, stays
    await lab.wait_for(lambda: "graceful restart active" not in bird.cmd("show", "protocols", "all", "e4"),
                       what="BIRD leaves graceful restart")
    assert "203.0.113.0/24" in bird.cmd("show", "route", "table", "master4")


async def test_md5_right_password_comes_up_and_wrong_one_does_not(lab):
    (lab.tmp / "good").write_text("s3cret-Pw\n")
    (lab.tmp / "bad").write_text("not-the-password\n")
    lab.bird(bird_conf(protocols=[
        bgp_protocol("good", local="10.99.0.1", local_as=65000, neighbor="10.99.0.2", neighbor_as=65001,
                     password="s3cret-Pw", export={4: ""}),
        bgp_protocol("bad", local="10.99.0.3", local_as=65000, neighbor="10.99.0.4", neighbor_as=65001,
                     password="s3cret-Pw", export={4: ""}),
    ]))
    sp = await lab.speaker_for(peer("good", "10.99.0.1", md5PasswordFile=str(lab.tmp / "good")),
                               peer("bad", "10.99.0.3", md5PasswordFile=str(lab.tmp / "bad")))
    await lab.wait(is_eor("10.99.0.1", Family.IPV4_UNICAST), what="MD5 session with routes")
    assert lab.prefixes("10.99.0.1", Family.IPV4_UNICAST) == set(V4)
    # BIRD retries every second and ExaBGP keeps connecting: give the wrong key a few rounds
    deadline = time.monotonic() + 3
    while time.monotonic() < deadline:
        assert sp.peer_states.get("10.99.0.3") is not PeerStatus.UP
        await asyncio.sleep(0.1)
    assert not any(isinstance(e, PeerState) and e.peer == "10.99.0.3" and e.state is not PeerStatus.DOWN
                   for e in lab.events)
    assert "s3cret" not in repr(sp.peers) and "not-the-password" not in repr(sp.peers)


async def test_stop_sends_no_notification_and_bird_keeps_our_route(lab):
    bird = lab.bird(bird_conf())
    sp = await lab.speaker_for(peer("e4", "10.99.0.1"))
    await lab.wait(is_state("10.99.0.1", PeerStatus.UP), what="up")
    sp.send(AnnounceRoute("203.0.113.0/24", peer="10.99.0.1"))
    await lab.wait_for(lambda: "203.0.113.0/24" in bird.cmd("show", "route", "table", "master4"),
                       what="our route in BIRD")
    await sp.stop()
    lab.speaker = None
    await lab.wait_for(lambda: "Established" not in bird.protocol_state("e4"), what="BIRD sees the session end")
    info = bird.cmd("show", "protocols", "all", "e4")
    assert "Received: Cease" not in info and "Last error:       Socket: Connection closed" in info, info
    assert "Neighbor graceful restart active" in info  # no NOTIFICATION on SIGTERM: BIRD helps
    assert "203.0.113.0/24" in bird.cmd("show", "route", "table", "master4")  # graceful restart: stale


async def test_without_graceful_restart_teardown_sends_cease_and_stop_sends_nothing(lab):
    bird = lab.bird(bird_conf(protocols=[bgp_protocol(
        "e4", local="10.99.0.1", local_as=65000, neighbor="10.99.0.2", neighbor_as=65001,
        graceful_restart=False)]))
    sp = await lab.speaker_for(peer("e4", "10.99.0.1", gracefulRestartSeconds=0))
    await lab.wait(is_state("10.99.0.1", PeerStatus.UP), what="up")
    start = len(lab.events)
    sp.send(Teardown("10.99.0.1", 1))
    down = await lab.wait(is_state("10.99.0.1", PeerStatus.DOWN), start=start, what="torn down")
    assert down.reason == "notification sent (6,1)"
    await lab.wait_for(lambda: "Received: Maximum number of prefixes reached" in bird.log.read_text(),
                       what="BIRD got Cease 6/1")
    await lab.wait(is_state("10.99.0.1", PeerStatus.UP), start=start, what="up again", timeout=20)
    await sp.stop()
    lab.speaker = None
    await lab.wait_for(lambda: "Established" not in bird.protocol_state("e4"), what="BIRD sees the end")
    assert "Socket: Connection closed" in bird.protocol_state("e4")  # SIGTERM: no NOTIFICATION
    assert bird.log.read_text().count("Received:") == 1
