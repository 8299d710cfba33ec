#!/usr/bin/env python3
"""Benchmark: a silent peer failure with N routes learned from two BIRD peers as ECMP.

A BIRD 2 ToR in namespace `tor` announces the same N IPv4 /24s over two eBGP sessions, from
10.0.0.1 (link tor0 <-> up0) and 10.0.1.1 (link tor1 <-> up1), to the receiver in `node`: every
prefix is an ECMP route through both. Then the first link goes silent: in `tor`, the neighbour
entry of 10.0.0.254 is replaced by a MAC nobody has, so every packet BIRD sends that way is
dropped by the receiving NIC while nothing goes down (TCP notices only at the hold timer).

Measured from that moment until the kernel in `node` forwards every sampled prefix through
10.0.1.1 only (`ip route get` on 16 prefixes spread over the table, every 20 ms): the
repair time, and the kernel writes on the way (route and nexthop notifications of `ip monitor
route nexthop` until the repair was seen). Receivers, each in fresh namespaces with a fresh ToR:

  (a) agent:     the agent, BFD 100 ms x 3 with both peers, nexthop objects on, maxPaths 2;
  (b) bird:      reference: a BIRD in `node` with the same BFD, ``merge paths`` into the kernel;
  (c) agent_nobfd: the agent without BFD, hold time 9 s (the session ends at the hold timer).

For (a) the benchmark then waits for the agent's RIB clean-up (`cleanup_s`, from its log) and
counts every kernel notification until then (`writes_total`). Two variants put the failure in
the agent's way: ``--fail-during-scan`` silences the peer as soon as a full kernel scan started
(its dump must give way), ``--fail-while-learning M`` once M more prefixes are being written
(a FIB batch in flight; its group replaces must overtake it).

The receivers are polled with one ``ip -batch`` of ``route get`` per round (16 addresses), so
the measuring costs one process per 20 ms. Last line: one JSON object with ``repair_s`` and
``writes_to_repair`` of (a), ``ref_repair_s`` (b), ``ratio`` (b / a), ``nobfd_repair_s`` (c),
and per receiver the details.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import json
import os
import re
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from testlab.benchlab import (  # noqa: E402
    PatientBird, finish, launch_agent, prefix_text, ratio, setup, static_s4, table_routes, work_directory,
)
from testlab.bird import bgp_protocol  # noqa: E402
from testlab.monitor import Monitor  # noqa: E402
from testlab.netns import api_get, ip, namespace, sh, sysctl, veth_between, wait_for  # noqa: E402

BOGUS_MAC = "02:00:00:00:be:ef"
BFD_BIRD = 'protocol bfd {{ interface "{dev}" {{ min rx interval 100 ms; min tx interval 100 ms; multiplier 3; }}; }}\n'
TCP_MEM = "4096 1048576 67108864"


def tor_config(n: int, bfd: bool, extra: int = 0) -> str:
    """The ToR: `n` prefixes announced on both sessions, and `extra` more in a static protocol
    `extra` that starts disabled (``birdc enable extra``: a table to learn while the failure comes)."""
    more = static_s4(f"{prefix_text(n + i)} blackhole" for i in range(extra)).replace(
        "protocol static s4 {\n", "protocol static extra {\n  disabled;\n") if extra else ""
    return ("router id 10.0.0.1;\nlog stderr all;\nprotocol device { scan time 10; }\n"
            + (BFD_BIRD.format(dev="tor*") if bfd else "")
            + static_s4(f"{prefix_text(i)} blackhole" for i in range(n)) + more
            + "".join(bgp_protocol(name, local=local, local_as=65001, neighbor=nbr, neighbor_as=65000,
                                   export={4: ""}, import_all=False, hold_time=9, graceful_restart=False,
                                   extra="    bfd on;" if bfd else "")
                      for name, local, nbr in (("a", "10.0.0.1", "10.0.0.254"), ("b", "10.0.1.1", "10.0.1.254"))))


def node_bird_config() -> str:
    return ("router id 10.0.0.254;\nlog stderr { warning, error, fatal, bug };\nprotocol device { scan time 10; }\n"
            + BFD_BIRD.format(dev="up*")
            + "protocol kernel k4 { scan time 60; merge paths on; ipv4 { import none; export all; }; }\n"
            + "".join(bgp_protocol(name, local=local, local_as=65000, neighbor=nbr, neighbor_as=65001,
                                   hold_time=9, graceful_restart=False, extra="    bfd on;")
                      for name, local, nbr in (("a", "10.0.0.254", "10.0.0.1"), ("b", "10.0.1.254", "10.0.1.1"))))


FULL_SCAN_SECONDS = 60  # the agent's default; --full-scan-seconds


def agent_config(bfd: bool) -> str:
    peers = []
    for name, addr, local in (("tora", "10.0.0.1", "10.0.0.254"), ("torb", "10.0.1.1", "10.0.1.254")):
        peers.append(f"""apiVersion: routeagent.io/v1alpha1
kind: BgpPeer
metadata: {{name: {name}}}
spec:
  peerAddress: "{addr}"
  peerAS: 65001
  localAS: 65000
  routerId: 10.0.0.254
  localAddress: "{local}"
  holdTime: 9
  gracefulRestartSeconds: 0
  importPolicy: acceptAll
""" + ("  bfd: {minRx: 100, minTx: 100, multiplier: 3}\n" if bfd else ""))
    return ("apiVersion: routeagent.io/v1alpha1\nkind: AgentConfig\nmetadata: {name: node}\n"
            f"spec:\n  maxPaths: 2\n  fib:\n    nexthopObjects: \"on\"\n    fullScanSeconds: {FULL_SCAN_SECONDS}\n---\n"
            + "---\n".join(peers))


def sample(n: int) -> list[str]:
    return [prefix_text(i * (n // 16)).replace(".0/24", ".1") for i in range(16)]


def via(ns: str, addrs: list[str]) -> set[str]:
    """The gateways the kernel forwards `addrs` through, by one ``ip -batch`` of ``route get``s
    (one process per poll: the measuring must not take the CPU the receivers need)."""
    out = sh("ip", "-n", ns, "-4", "-batch", "-", input="".join(f"route get {a}\n" for a in addrs),
             check=False).stdout
    answers = [line for line in out.splitlines() if line[:1].isdigit()]  # the "cache" lines follow
    gws = {"10.0.1.1" if "via 10.0.1.1" in a else "10.0.0.1" if "via 10.0.0.1" in a else "none" for a in answers}
    if len(answers) < len(addrs):
        gws.add("none")  # an address without a route: ip -batch stops at its error
    return gws


def _kind(line: str) -> str:
    """What one `ip monitor route nexthop` line reports: route/nexthop, added/deleted."""
    what = "nexthop" if line.startswith(("id ", "Deleted id ")) else "route"
    return ("deleted " if line.startswith("Deleted") else "") + what


def settled(node: str, bfd: bool) -> bool:
    """No route op of the agent's pending, and (with BFD) both sessions Up at 100 ms x 3."""
    metrics = api_get(node, "/metrics") or ""
    if not re.search(r"^route_agent_fib_pending_routes 0\.0$", metrics, re.M):
        return False
    if not bfd:
        return True
    rows = json.loads(api_get(node, "/api/peers") or "[]")
    return len(rows) == 2 and all((r.get("bfd") or {}).get("state") == "up"
                                  and ((r.get("bfd") or {}).get("detectionMs") or 1e9) <= 300 for r in rows)


def _scan_lines(log: str) -> int:
    with open(log, errors="replace") as f:
        return f.read().count("full kernel scan: connected-route-deleted")


def run(kind: str, n: int, workdir: str, timeout: float, during_scan: bool = False, learning: int = 0) -> dict:
    with contextlib.ExitStack() as stack:
        tor = stack.enter_context(namespace("ra-fo-tor-"))
        node = stack.enter_context(namespace("ra-fo-node-"))
        for ns in (tor, node):
            sysctl(ns, f"net.ipv4.tcp_rmem={TCP_MEM}", f"net.ipv4.tcp_wmem={TCP_MEM}")
        sysctl(node, "net.ipv4.nexthop_compat_mode=0")
        for i in (0, 1):
            veth_between(node, f"up{i}", f"10.0.{i}.254/24", tor, f"tor{i}", f"10.0.{i}.1/24")
        bird = PatientBird(tor, os.path.join(workdir, "tor"), tor_config(n, bfd=kind != "agent_nobfd", extra=learning))
        stack.callback(bird.close)
        wait_for(lambda: table_routes(bird) >= n, timeout, 0.5, what="ToR loaded")
        if kind == "bird":
            rx = PatientBird(node, os.path.join(workdir, "node"), node_bird_config())
            stack.callback(rx.close)
        else:
            conf = os.path.join(workdir, "conf")
            os.makedirs(conf, exist_ok=True)
            with open(os.path.join(conf, "agent.yaml"), "w") as f:
                f.write(agent_config(bfd=kind == "agent"))
            launch_agent(node, ["--config", conf, "--state-dir", os.path.join(workdir, "state")],
                         os.path.join(workdir, "agent.log"), stack)
        probes = sample(n)

        def learned():
            routes = ip(node, "-4", "route", "show", "table", "main", check=False).count("\n")
            return routes >= n and via(node, probes) >= {"10.0.0.1", "10.0.1.1"}
        wait_for(learned, timeout, 1.0, what="ECMP table in the kernel")
        if kind == "bird":
            wait_for(lambda: rx.command("show bfd sessions").count(" Up ") >= 2, timeout, 0.2,
                     what="BIRD's BFD sessions up")
        else:
            wait_for(lambda: settled(node, bfd=kind == "agent"), timeout, 0.2,
                     what="the agent's FIB written and its BFD sessions at their fast rate")
        mon = Monitor(node, ("route", "nexthop"), strict=False)
        stack.callback(mon.close)
        if kind != "bird":  # the monitor's marker route (a dev route on lo, added and deleted) makes
            # the agent rescan the kernel ("connected-route-deleted": ~1 s at 100k routes, ~5 s at
            # 500k): wait until that scan is done, so it is not what the failure meets
            wait_for(lambda: 'reason="connected-route-deleted"' in (api_get(node, "/metrics") or ""),
                     timeout, 0.1, what="the agent's rescan after the monitor's marker")
            wait_for(lambda: api_get(node, "/readyz") is not None, timeout, 0.1, what="the agent answering")
        if during_scan and kind != "bird":  # another marker: the failure comes during the scan it causes
            log = os.path.join(workdir, "agent.log")
            scans = _scan_lines(log)
            ip(node, "route", "add", "192.0.2.99/32", "dev", "lo")
            ip(node, "route", "del", "192.0.2.99/32", "dev", "lo")
            wait_for(lambda: _scan_lines(log) > scans, timeout, 0.01, what="the agent's scan starting")
        if learning:  # the failure comes while the receiver writes `learning` new routes
            bird.command("enable extra")
            base = len(mon.lines)
            wait_for(lambda: len(mon.lines) - base >= 1000, timeout, 0.005, what="the new routes being written")
        start_lines = len(mon.lines)
        t0 = time.monotonic()
        ip(tor, "-4", "neigh", "replace", "10.0.0.254", "lladdr", BOGUS_MAC, "dev", "tor0", "nud", "permanent")
        repaired = None
        while time.monotonic() - t0 < (150 if kind == "agent_nobfd" else 30):
            if via(node, probes) == {"10.0.1.1"}:
                repaired = time.monotonic() - t0
                break
            time.sleep(0.02)
        writes = len(mon.lines) - start_lines
        if learning:  # the new routes' notifications are not repair writes: count nexthop objects only
            writes = sum(1 for line in mon.lines[start_lines:] if _kind(line).endswith("nexthop"))
        print(f"{kind}: {n} routes, repair {repaired if repaired is None else round(repaired, 3)} s, "
              f"{writes} kernel route/nexthop notifications until then", flush=True)
        out = {"repair_s": None if repaired is None else round(repaired, 3), "writes_to_repair": writes}
        if kind == "agent" and repaired is not None:  # then the RIB's clean-up, in the background
            log = os.path.join(workdir, "agent.log")
            done = wait_for(lambda: re.search(r"RIB clean-up done, (\d+) routes withdrawn in ([\d.]+) s",
                                              open(log, errors="replace").read()), timeout, 0.2,
                            what="the agent's RIB clean-up")
            out["cleanup_s"], out["writes_total"] = float(done.group(2)), len(mon.lines) - start_lines
            kinds = collections.Counter(_kind(line) for line in mon.lines[start_lines:])
            print(f"{kind}: RIB clean-up of {done.group(1)} routes done in {out['cleanup_s']} s; "
                  f"{out['writes_total']} kernel notifications in all: {dict(kinds)}", flush=True)
            for line in mon.lines[start_lines:start_lines + 8]:
                print("   ", line[:160])
        return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--routes", type=int, default=100_000)
    ap.add_argument("--only", default="agent,bird,agent_nobfd")
    ap.add_argument("--timeout", type=float, default=600)
    ap.add_argument("--keep", action="store_true")
    ap.add_argument("--full-scan-seconds", type=int, default=60,
                    help="the agent's periodic full scan (default the agent's 60 s): the scan runs on the core "
                         "task (~1 s at 100k routes, ~5 s at 500k) and a BFD Down arriving meanwhile waits for it")
    ap.add_argument("--fail-during-scan", action="store_true",
                    help="make the agent start a full kernel scan (a dev route on lo added and deleted) and "
                         "silence the peer as soon as the scan has started: its dump gives way to the BFD Down")
    ap.add_argument("--fail-while-learning", type=int, default=0, metavar="M",
                    help="once the table is in place, the ToR announces M more prefixes, and the peer is "
                         "silenced as soon as 1,000 of them are in the kernel: the failure meets a FIB batch "
                         "in flight (writes_to_repair then counts nexthop notifications only)")
    args = ap.parse_args()
    global FULL_SCAN_SECONDS
    FULL_SCAN_SECONDS = args.full_scan_seconds
    if not setup("failover"):
        return 2
    results = {}
    for kind in args.only.split(","):
        with work_directory(f"ra-failover-{kind}-", args.keep) as workdir:
            results[kind] = run(kind, args.routes, workdir, args.timeout, args.fail_during_scan,
                                args.fail_while_learning)
    a, b = results.get("agent", {}), results.get("bird", {})
    out = {"routes": args.routes, "repair_s": a.get("repair_s"), "writes_to_repair": a.get("writes_to_repair"),
           "ref_repair_s": b.get("repair_s"),
           "ratio": ratio(b["repair_s"], a["repair_s"]) if a.get("repair_s") and b.get("repair_s") else None,
           "nobfd_repair_s": results.get("agent_nobfd", {}).get("repair_s"), "runs": results}
    return finish(out, ok=a.get("repair_s") is not None if "agent" in results else True)


if __name__ == "__main__":
    sys.exit(main())
