"""The agent needs no CAP_NET_RAW (deploy/daemonset.yaml drops it): run it without, against BIRD.

The agent and its ExaBGP child are started under ``capsh --drop=cap_net_raw`` (the capability is
gone from the bounding set, so neither root process can have it): netlink route writes (NET_ADMIN
only), the BGP session over TCP with an MD5 key (TCP_MD5SIG), learning v4 and v6 routes into the
kernel, all as in the DaemonSet. Skipped where capsh is missing.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

import testlab.netns as netns
from conftest import agent_config, bgp_peer, tor_config

CAP_NET_RAW = 13
V4, V6 = ["192.0.2.0/24"], ["2001:db8:1::/48"]

pytestmark = pytest.mark.skipif(shutil.which("capsh") is None, reason="capsh (libcap2-bin) is not installed")


@pytest.fixture
def without_net_raw(monkeypatch):
    plain = netns.agent_cmd

    def agent_cmd(ns: str, *args: str, python_args: tuple[str, ...] = ()) -> list[str]:
        cmd = plain(ns, *args, python_args=python_args)
        cut = cmd.index(ns) + 1  # after `ip netns exec NS`
        return cmd[:cut] + ["capsh", "--drop=cap_net_raw", "--", "-c", 'exec "$0" "$@"', *cmd[cut:]]

    monkeypatch.setattr(netns, "agent_cmd", agent_cmd)


def _effective_caps(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("CapEff:"):
            return int(line.split()[1], 16)
    raise AssertionError(f"no CapEff for {pid}")


def _children(pid: int) -> list[int]:
    return [int(c) for c in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]


def test_learning_with_md5_works_without_net_raw(bgp_lab, without_net_raw, tmp_path):
    node = bgp_lab.node
    (tmp_path / "key").write_text("s3cret-Pw\n")
    bgp_lab.bird("tor", tor_config(V4, V6, bgp_extra='    password "s3cret-Pw";'))
    node.write("agent.yaml", agent_config("  fib:\n    staleSeconds: 15\n"))
    extra = f"  importPolicy: acceptAll\n  md5PasswordFile: {tmp_path / 'key'}\n"
    node.write("peers.yaml", bgp_peer("tor4", "10.0.0.1", "10.0.0.254", extra=extra) + "---\n"
               + bgp_peer("tor6", "fd00::1", "fd00::254", extra=extra))
    proc = node.start()
    node.wait_routes(lambda r: set(V4) <= set(r), timeout=30)
    node.wait_routes(lambda r: set(V6) <= set(r), family=6, timeout=30)
    assert {p["address"]: p["state"] for p in node.api("/api/peers")} == {"10.0.0.1": "up", "fd00::1": "up"}
    # the agent really ran without it, and so did ExaBGP (its child)
    procs = [proc.pid, *_children(proc.pid)]
    assert len(procs) >= 2, "ExaBGP is not a child of the agent"
    for pid in procs:
        caps = _effective_caps(pid)
        assert not caps & (1 << CAP_NET_RAW) and caps & (1 << 12), (pid, hex(caps))  # 12: NET_ADMIN
