"""The ExaBGP launcher's pure parts, the version check end to end, and the patched reader.

The launcher and its patches are standalone files (they run in ExaBGP's interpreter); the pure
helpers are tested here directly. What needs ExaBGP patched runs in a subprocess, so the patches
never touch the ExaBGP classes of the test process.
"""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import textwrap

import pytest

from agent.config.bgp import BgpPeer, BgpSpeakerSpec
from agent.config.loader import ConfigError
from agent.speaker import exabgp_patches as patches
from agent.speaker import exabgp_reading as reading
from agent.speaker import launcher
from agent.speaker.child import LAUNCHER, check_exabgp, exabgp_argv
from agent.speaker.process import Speaker


# ---- options and version --------------------------------------------------------------------------

def test_parse_args_takes_its_options_then_hands_the_rest_to_exabgp():
    o = launcher.parse_args(["--unpaced", "--raw-updates", "--", "exabgp", "server", "/x.conf"])
    assert (o.unpaced, o.raw_updates, o.stock, o.check) == (True, True, False, False)
    assert o.argv == ["server", "/x.conf"]
    o = launcher.parse_args(["server", "/x.conf"])  # no option, no "exabgp" word
    assert (o.unpaced, o.raw_updates, o.argv) == (False, False, ["server", "/x.conf"])
    o = launcher.parse_args(["--async-limit", "50", "--async-budget-ms", "20", "exabgp", "server", "c"])
    assert (o.async_limit, o.async_budget, o.argv) == (50, 0.02, ["server", "c"])
    assert launcher.parse_args(["--check"]).argv == []


@pytest.mark.parametrize("args", [[], ["--unpaced"], ["--async-limit"], ["--async-limit", "x", "server"]])
def test_parse_args_refuses_nothing_to_run_and_bad_numbers(args):
    with pytest.raises(ValueError):
        launcher.parse_args(args)


def test_version_problem_is_fatal_only_for_raw_updates():
    assert launcher.version_problem("5.0.15", raw_updates=True) is None
    message, fatal = launcher.version_problem("4.2.21", raw_updates=True)
    assert fatal and "5.0.15" in message and "4.2.21" in message and "updates: json" in message
    assert "\n" not in message
    message, fatal = launcher.version_problem("5.0.16", raw_updates=False)
    assert not fatal and "without the agent's patches" in message
    message, fatal = launcher.version_problem(None, raw_updates=True)
    assert fatal and "no importable ExaBGP" in message


def test_argv_runs_the_launcher_unpaced_with_raw_updates_only_when_asked():
    assert exabgp_argv("/py", "/c.conf") == ["/py", LAUNCHER, "--unpaced", "--", "exabgp", "server", "/c.conf"]
    assert "--raw-updates" in exabgp_argv("/py", "/c.conf", raw_updates=True)
    assert os.path.isfile(LAUNCHER) and os.path.isfile(os.path.join(os.path.dirname(LAUNCHER), "exabgp_patches.py"))


@pytest.fixture
def other_exabgp(tmp_path):
    """An "interpreter" (a wrapper script around this Python) whose ExaBGP says it is 4.2.21."""
    fake = tmp_path / "site" / "exabgp"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text("")
    (fake / "version.py").write_text("release = '4.2.21'\n")
    wrapper = tmp_path / "python-old-exabgp"
    wrapper.write_text(f"#!/bin/sh\nPYTHONPATH={tmp_path / 'site'} exec {sys.executable} \"$@\"\n")
    wrapper.chmod(wrapper.stat().st_mode | stat.S_IXUSR)
    return str(wrapper)


def test_check_refuses_raw_updates_on_another_exabgp_with_one_line(other_exabgp):
    assert check_exabgp(sys.executable, raw_updates=True) is None  # the pinned one is installed here
    problem = check_exabgp(other_exabgp, raw_updates=True)
    assert problem.startswith("route-agent launcher: raw UPDATEs need ExaBGP 5.0.15") and "4.2.21" in problem
    assert check_exabgp(other_exabgp, raw_updates=False) is None  # json: runs unpatched, with a warning
    r = subprocess.run([other_exabgp, LAUNCHER, "--unpaced", "--raw-updates", "--", "exabgp", "server", "/nope"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == launcher.EXIT_VERSION and r.stderr.count("\n") == 1


async def test_speaker_in_raw_mode_refuses_to_start_on_another_exabgp(other_exabgp, tmp_path):
    peer = BgpPeer.model_validate({"metadata": {"name": "p"}, "spec": {
        "peerAddress": "127.0.0.2", "peerAS": 65000, "localAS": 65001, "routerId": "10.0.0.1"}})
    sp = Speaker([peer], BgpSpeakerSpec(interpreter=other_exabgp, updates="raw"), runtime_dir=tmp_path / "rt")
    with pytest.raises(ConfigError) as err:
        await sp.start()
    (problem,) = err.value.problems
    assert problem.field == "spec.updates" and "ExaBGP 5.0.15" in problem.message and "4.2.21" in problem.message
    assert sp._task is None


def test_updates_setting_defaults_to_raw():
    assert BgpSpeakerSpec().updates.value == "raw"
    assert BgpSpeakerSpec(updates="raw").updates.value == "raw"
    with pytest.raises(ValueError):
        BgpSpeakerSpec(updates="binary")


# ---- the raw-update line and the frames ---------------------------------------------------------

def test_caps_flags_are_the_fixed_contract():
    assert reading.caps_flags(False, False, False, False) == 0
    assert reading.caps_flags(True, False, False, False) == 1
    assert reading.caps_flags(False, True, False, False) == 2
    assert reading.caps_flags(False, False, True, False) == 4
    assert reading.caps_flags(False, False, False, True) == 8
    assert reading.caps_flags(True, True, True, True) == 15
    assert reading.raw_prefix("fd00::1", 9) + b"\x00\x00\x00\x00".hex() == "raw-update fd00::1 9 00000000"


MARKER = b"\xff" * 16


def frame(msg_type: int, body: bytes = b"", length: int | None = None) -> bytes:
    return MARKER + (length if length is not None else 19 + len(body)).to_bytes(2, "big") + bytes([msg_type]) + body


def test_split_frame_waits_for_whole_messages_and_walks_a_buffer():
    two = frame(4) + frame(2, b"\x00\x00\x00\x00")
    assert reading.split_frame(two[:18], 0, 4096) is None  # header incomplete
    assert reading.split_frame(two[:19 + 19 + 3], 19, 4096) is None  # second body incomplete
    end, msg_type, length, err = reading.split_frame(two, 0, 4096)
    assert (end, msg_type, length, err) == (19, 4, 19, None)
    assert reading.split_frame(two, end, 4096) == (42, 2, 23, None)


def test_split_frame_header_errors():
    assert reading.split_frame(b"\x00" * 16 + frame(4)[16:], 0, 4096)[3] == (1, 1, b"")
    assert reading.split_frame(frame(4, length=5), 0, 4096)[3] == (1, 2, b"\x00\x05")
    big = frame(2, b"\x00" * 5000)
    assert reading.split_frame(big, 0, 4096)[3] == (1, 2, big[16:18])  # no extended messages
    assert reading.split_frame(big, 0, 65535)[3] is None
    lengths = {4: lambda n: n == 19}
    assert reading.split_frame(frame(4, b"x"), 0, 4096, lengths)[3] == (1, 2, b"\x00\x14")


@pytest.mark.parametrize("command,expect", [
    ("notify 6 3", (6, 3, b"")),
    ("notify 3 1 0a0b", (3, 1, b"\x0a\x0b")),
    ("notify 6 2 0548656c6c6f", (6, 2, b"\x05Hello")),
])
def test_parse_notify(command, expect):
    assert patches.parse_notify(command) == expect


@pytest.mark.parametrize("command", ["notify 6", "notify 0 1", "notify 6 256", "notify x 1", "notify 6 3 abc",
                                     "notify 6 3 zz", "teardown 6 3", "notify 6 3 00 00", "notify 6 3 " + "00" * 4076])
def test_parse_notify_refuses(command):
    with pytest.raises(ValueError):
        patches.parse_notify(command)


# ---- the patched reader and API loop, in a subprocess -----------------------------------------------

PATCHED = textwrap.dedent("""
    import socket, sys, time
    sys.path.insert(0, {here!r})
    import exabgp_patches as patches
    patches.install(unpaced=True, async_budget=0.01)
    from exabgp.reactor.network.connection import Connection
    from exabgp.reactor.asynchronous import ASYNC
    from exabgp.environment import getenv
    from exabgp.logger import log
    log.silence(); log.init(getenv())

    a, b = socket.socketpair()
    a.setblocking(False)
    conn = Connection(None, "peer", "local")
    conn.io = a
    M = b"\\xff" * 16
    ka = M + b"\\x00\\x13\\x04"
    upd = M + b"\\x00\\x17\\x02" + b"\\x00" * 4
    assert conn.next_message() is None  # nothing yet
    b.sendall(ka + upd[:10])
    got = conn.next_message()
    assert got[:2] == (19, 4) and got[4] is None, got
    assert conn.next_message() is None  # half an UPDATE
    b.sendall(upd[10:] + ka + ka)
    got = [conn.next_message() for _ in range(3)]
    assert [g[1] for g in got] == [2, 4, 4] and got[0][3] == b"\\x00" * 4, got
    b.sendall(b"\\x00" * 19)
    assert (conn.next_message()[4].code, 1) == (1, 1)

    # the API loop: steps in order, a budget per turn, WAIT ends the turn
    order = []
    def gen(name, n, wait_at=None):
        for i in range(n):
            order.append((name, i))
            yield patches.WAIT if i == wait_at else False
    q = ASYNC()
    q.schedule("a", "a", gen("a", 3))
    q.schedule("b", "b", gen("b", 2, wait_at=0))
    q.schedule("c", "c", gen("c", 1))
    assert q.run() is True  # a's 3 steps, then b waits at its first
    assert order == [("a", 0), ("a", 1), ("a", 2), ("b", 0)], order
    assert q.run() is False and order[-2:] == [("b", 1), ("c", 0)], order
    def slow():
        while True:
            time.sleep(0.002)
            yield False
    q.schedule("s", "s", slow())
    t0 = time.monotonic()
    assert q.run() is True
    assert 0.009 < time.monotonic() - t0 < 0.2  # the budget, plus one step on a busy machine
    print("ok")
""")


def test_patched_reader_and_api_loop_in_exabgp():
    here = os.path.dirname(patches.__file__)
    r = subprocess.run([sys.executable, "-c", PATCHED.format(here=here)], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stdout + r.stderr


def test_launcher_and_patches_import_nothing_from_the_agent():
    for module in (launcher, patches, reading):
        source = open(module.__file__).read()
        assert "from agent" not in source and "import agent" not in source and "from ." not in source


RELOAD = textwrap.dedent("""
    import sys
    sys.path.insert(0, {here!r})
    import exabgp_patches as patches
    patches.install()
    from exabgp.bgp.fsm import FSM
    from exabgp.bgp.neighbor import Neighbor
    from exabgp.reactor.peer import Peer
    old, new = Neighbor(), Neighbor()
    peer = Peer.__new__(Peer)  # (only what reconfigure reads)
    peer.neighbor, peer._neighbor, peer.fsm = old, None, FSM.ESTABLISHED
    old.refresh.extend(["r1", "r2"]); old.eor.append("e"); old.messages.append("m")
    new.refresh.append("r3")
    peer.reconfigure(new)
    assert peer.neighbor is new
    assert (list(new.refresh), list(new.eor), list(new.messages)) == (["r1", "r2", "r3"], ["e"], ["m"])
    assert not (old.refresh or old.eor or old.messages)
    from exabgp.reactor.loop import Reactor
    assert Reactor._pending_adjribout(None) is False  # a reload is never dropped for routes to send
    print("ok")
""")


def test_a_reload_keeps_what_the_api_queued_for_an_established_peer():
    here = os.path.dirname(patches.__file__)
    r = subprocess.run([sys.executable, "-c", RELOAD.format(here=here)], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stdout + r.stderr
