"""The ExaBGP supervisor with a real ExaBGP child, no BGP traffic (no root needed).

ExaBGP listens on 127.0.0.1 (a free high port) for one passive neighbour that never connects, so
these tests exercise the process handling only: command queueing and acks, crash detection,
restart with backoff, recovery from an unusable configuration, orphan cleanup, clean stop.
"""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import subprocess
import sys
import time

import pytest

from agent.config.bgp import BgpPeer, BgpSpeakerSpec
from agent.core.bgp import (
    AnnounceEor, AnnounceRoute, Family, PeerState, PeerStatus, SpeakerRestarted, Teardown, WithdrawRoute,
)
from agent.core.bgp_speaker import CommandAck, CommandsDropped, SpeakerDown
from agent.speaker.process import Speaker


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def passive_peer(**spec) -> BgpPeer:
    return BgpPeer.model_validate({"metadata": {"name": "lo"}, "spec": {
        "peerAddress": "127.0.0.2", "peerAS": 65000, "localAS": 65001, "routerId": "10.0.0.1",
        "localAddress": "127.0.0.1", "passive": True, **spec}})


def make_speaker(tmp_path, *peers, **kw) -> Speaker:
    settings = BgpSpeakerSpec(listenAddresses=["127.0.0.1"], listenPort=free_port())
    return Speaker(peers or (passive_peer(),), settings, runtime_dir=tmp_path / "rt",
                   backoff_min=0.1, backoff_max=0.5, **kw)


async def until(cond, timeout=20.0, what=""):
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out waiting for {what or cond}")
        await asyncio.sleep(0.02)


class Collector:
    def __init__(self, sp: Speaker) -> None:
        self.events: list = []
        self.task = asyncio.create_task(self._run(sp))

    async def _run(self, sp):
        async for ev in sp.events():
            self.events.append(ev)


async def test_commands_queued_before_start_are_acked_and_send_never_blocks(tmp_path):
    sp = make_speaker(tmp_path)
    sp.send(AnnounceRoute("10.1.0.0/24", peer="127.0.0.2"))
    sp.send("no such command")
    t0 = time.monotonic()
    for i in range(500):
        sp.send(AnnounceRoute(f"10.2.{i // 256}.{i % 256}/32", peer="127.0.0.2", med=i))
    assert time.monotonic() - t0 < 0.5 and sp.pending_commands == 502
    async with sp:
        col = Collector(sp)
        await sp.wait_running(30)
        await asyncio.wait_for(sp.drained(), 30)  # all written (not necessarily answered yet)
        await until(lambda: sp.acks[True] == 501 and sp.acks[False] == 1, what="502 acks")
        assert sp.pending_commands == 0
        assert os.stat(sp.dir).st_mode & 0o777 == 0o700 and os.stat(sp.conf_path).st_mode & 0o777 == 0o600
    await asyncio.wait_for(col.task, 5)  # events() ends with stop()
    assert not sp.conf_path.exists()


async def test_crash_is_detected_peers_go_down_and_exabgp_restarts(tmp_path):
    sp = make_speaker(tmp_path)
    async with sp:
        col = Collector(sp)
        await sp.wait_running(30)
        first = sp.pid
        sp.peer_states["127.0.0.2"] = PeerStatus.UP  # as if the session were up
        sp.kill()
        await until(lambda: any(isinstance(e, SpeakerRestarted) for e in col.events), what="restart")
        down = next(i for i, e in enumerate(col.events) if isinstance(e, PeerState))
        assert col.events[down] == PeerState("127.0.0.2", PeerStatus.DOWN, "speaker exited with signal SIGKILL")
        assert col.events[down - 1] == SpeakerDown("exited with signal SIGKILL")  # the structured fact
        restarted = next(e for e in col.events if isinstance(e, SpeakerRestarted))
        assert restarted == SpeakerRestarted(1, "exited with signal SIGKILL")
        await sp.wait_running(30)
        assert sp.restarts == 1 and sp.pid != first
        with pytest.raises(ProcessLookupError):
            os.kill(first, 0)
        sp.send(AnnounceRoute("10.1.0.0/24", peer="127.0.0.2"))  # the new ExaBGP answers
        await until(lambda: sp.acks[True] == 1, what="ack from the new ExaBGP")
    pid = sp.pid
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)


async def test_unusable_configuration_is_retried_with_backoff_until_it_is_fixed(tmp_path):
    secret = tmp_path / "pw"
    sp = make_speaker(tmp_path, passive_peer(md5PasswordFile=str(secret)))
    async with sp:
        await until(lambda: sp.restarts >= 2, what="two failed attempts")
        assert not sp.running and "SecretError" in sp.last_exit and str(secret) in sp.last_exit
        secret.write_text("pw\n")
        await sp.wait_running(30)


async def test_orphaned_exabgp_of_a_previous_agent_is_killed(tmp_path):
    sp = make_speaker(tmp_path)
    sp.dir.mkdir(parents=True)
    orphan = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)", "exabgp", "server",
                               str(sp.conf_path)])
    (sp.dir / "exabgp.pid").write_text(f"{orphan.pid}\n")
    # just after fork/exec the kernel may still show an empty command line
    await until(lambda: b"exabgp" in open(f"/proc/{orphan.pid}/cmdline", "rb").read(), what="cmdline")
    async with sp:
        assert orphan.wait(10) == -9
        await sp.wait_running(30)


async def test_exabgp_has_its_own_process_group_in_the_agents_session(tmp_path):
    """A terminal's Ctrl-C goes to its foreground process group, so ExaBGP (and its API helper)
    must be in a group of their own; but in the agent's session, so the scheduler's autogroup
    shares the CPU between the agent and its speaker as a pod's cgroup does."""
    sp = make_speaker(tmp_path)
    async with sp:
        await sp.wait_running(30)
        pid = sp.pid
        (relay,) = relay_pids(sp)
        assert os.getpgid(pid) == pid != os.getpgrp()
        assert os.getpgid(relay) != os.getpgrp()  # (ExaBGP gives its API helpers a group each)
        assert os.getsid(pid) == os.getsid(relay) == os.getsid(0)
        # the file is empty when the task's cgroup is not the root one (no autogroup applies then)
        if os.path.exists("/proc/self/autogroup"):
            mine = open("/proc/self/autogroup").read().split()[:1]
            assert open(f"/proc/{pid}/autogroup").read().split()[:1] == mine


async def test_set_peers_validates_before_changing_anything(tmp_path):
    sp = make_speaker(tmp_path)
    with pytest.raises(ValueError, match="already used"):
        await sp.set_peers([passive_peer(), passive_peer()])
    assert len(sp.peers) == 1


def relay_pids(sp: Speaker) -> list[int]:
    out = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                cmd = open(f"/proc/{entry}/cmdline", "rb").read()
                state = open(f"/proc/{entry}/stat").read().split(") ")[1][0]
            except OSError:
                continue
            if b"relay.py" in cmd and str(sp._sock).encode() in cmd and state != "Z":
                out.append(int(entry))
    return out


async def test_a_dead_api_helper_restarts_exabgp(tmp_path):
    sp = make_speaker(tmp_path)
    async with sp:
        col = Collector(sp)
        await sp.wait_running(30)
        (relay,) = relay_pids(sp)
        os.kill(relay, 9)
        await until(lambda: any(isinstance(e, SpeakerRestarted) for e in col.events), what="restart")
        restarted = next(e for e in col.events if isinstance(e, SpeakerRestarted))
        # ExaBGP does not respawn the helper (respawn false): the supervisor restarts both
        assert restarted.reason == "closed its API connection"
        await sp.wait_running(30)
        assert len(relay_pids(sp)) == 1 and relay_pids(sp) != [relay]


async def test_commands_queued_for_a_dead_exabgp_are_not_replayed_into_the_new_one(tmp_path):
    """What was queued while ExaBGP was down was planned for the old process: the new one must get
    only what is sent after SpeakerRestarted (the re-announcement), else e.g. an old announce
    stays in its adj-RIB-out though nothing wants it any more."""
    sp = make_speaker(tmp_path)
    async with sp:
        col = Collector(sp)
        await sp.wait_running(30)
        sp.kill()
        await until(lambda: not sp.running, what="ExaBGP seen dead")
        old = [AnnounceRoute("10.9.0.0/24", peer="127.0.0.2"), WithdrawRoute("10.9.1.0/24", peer="127.0.0.2"),
               Teardown("127.0.0.2", 2)]
        for cmd in old:
            sp.send(cmd)
        await until(lambda: any(isinstance(e, SpeakerRestarted) for e in col.events), what="restart")
        marker = AnnounceRoute("10.1.0.0/24", peer="127.0.0.2", med=1)
        sp.send(marker)
        await until(lambda: any(isinstance(e, CommandAck) for e in col.events), what="an ack")
        await asyncio.sleep(0.3)  # room for old commands' acks to show up (they must not)
        assert [e for e in col.events if isinstance(e, CommandAck)] == [CommandAck(marker, True)]
        assert sp.acks == {True: 1} and sp.pending_commands == 0 and sp.dropped_commands == 3


async def test_acks_are_matched_to_their_commands_even_when_answered_at_once(tmp_path):
    """ExaBGP answers a teardown or an unparsable command at once and announces from its queue:
    the writer holds the former back until the latter are answered, so every ack finds its
    command."""
    sp = make_speaker(tmp_path)
    cmds = [AnnounceRoute("10.1.0.0/24", peer="127.0.0.2"), "no such command",
            AnnounceRoute("10.1.1.0/24", peer="127.0.0.9"),  # no such neighbour: error, from the queue
            Teardown("127.0.0.2", 2),  # answered at once (done)
            AnnounceEor(Family.IPV4_UNICAST, "127.0.0.2"),  # not established: error, at once
            *(AnnounceRoute(f"10.2.0.{i}/32", peer="127.0.0.2") for i in range(20))]
    for cmd in cmds:
        sp.send(cmd)
    async with sp:
        col = Collector(sp)
        await until(lambda: sum(isinstance(e, CommandAck) for e in col.events) == len(cmds), what="acks")
        acks = [e for e in col.events if isinstance(e, CommandAck)]
        assert acks == [CommandAck(c, ok) for c, ok in zip(cmds, [True, False, False, True, False] + [True] * 20)]
        assert sp.channel.in_flight == 0 and sp.channel.unmatched_acks == 0


async def test_a_full_queue_is_dropped_and_reported_and_send_still_never_blocks(tmp_path):
    sp = make_speaker(tmp_path, max_queued=10)  # not started: ExaBGP "dead", nothing drains
    sent = [AnnounceRoute(f"10.2.0.{i}/32", peer="127.0.0.2") for i in range(24)]
    sent[3] = Teardown("127.0.0.2", 1)
    sent[12] = AnnounceEor(Family.IPV4_UNICAST, "127.0.0.2")
    for cmd in sent:
        sp.send(cmd)
    assert sp.pending_commands == 4 and sp.dropped_commands == 20
    first, second = sp.queue.get_nowait(), sp.queue.get_nowait()
    # nothing lost silently: every dropped command (the Teardown and the EoR too) is in an event
    assert first == CommandsDropped(tuple(sent[:10]), "queue full")
    assert second == CommandsDropped(tuple(sent[10:20]), "queue full")
    assert sp.queue.empty()


async def test_batches_hand_over_what_is_waiting_in_order_and_bounded(tmp_path):
    """The agent takes speaker events in batches (one RIB change per burst of UPDATEs): a batch
    is what is already queued, in order, cut at `max_events` or about `max_routes` prefixes,
    and the stream ends at the stop marker after the events before it."""
    from agent.core.bgp import Announced, PathAttrs, RouteUpdate
    from agent.core.model import Prefix
    sp = make_speaker(tmp_path)
    a = PathAttrs()
    big = RouteUpdate("127.0.0.2", Family.IPV4_UNICAST,
                      tuple(Announced(Prefix.of(4, i << 8, 24), "127.0.0.2", a) for i in range(1, 4)))
    up = PeerState("127.0.0.2", PeerStatus.UP)
    for ev in (up, big, big, big, up, None):
        sp.queue.put_nowait(ev)
    got = [b async for b in sp.batches(max_events=4, max_routes=7)]
    assert got == [(up, big, big), (big, up)]  # 1 + 3 + 3 = 7 prefixes: cut; then the rest


async def test_set_peers_reloads_exabgp_only_when_its_configuration_text_changes(tmp_path):
    sp = make_speaker(tmp_path)
    async with sp:
        await sp.wait_running(30)
        signals: list[int] = []
        sp.kill = signals.append
        first = sp.conf_path.read_text()
        await sp.set_peers([passive_peer(importPolicy="acceptAll")])  # ours only: ExaBGP sees nothing
        assert signals == [] and sp.conf_path.read_text() == first
        await sp.set_peers([passive_peer(holdTime=30)])
        assert signals == [signal.SIGUSR1] and "hold-time 30;" in sp.conf_path.read_text()
        await sp.set_peers([passive_peer(holdTime=30)])
        assert signals == [signal.SIGUSR1]
