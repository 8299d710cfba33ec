"""Failover: N prefixes learned as ECMP from two BIRD peers; one peer goes silent. How long until
the kernel forwards every prefix through the survivor only, and how many kernel writes on the way.

Usage: python bench/failover.py [--routes 100000] [--only agent_bfd,bird_bfd,agent_hold] [--repeat 1]

Topology: namespace `node` (the measured side) with two links, a0 (10.1.0.254/24) to the BIRD in
`pa` (10.1.0.1, AS 65001) and b0 (10.2.0.254/24) to the BIRD in `pb` (10.2.0.1, AS 65001). Both
peers announce the same N /24s with the same attributes, so the node installs each as one ECMP
route through 10.1.0.1 and 10.2.0.1. Then `pb` stops sending anything to the node: a permanent
neighbour entry in `pb` sends every frame for 10.2.0.254 to a MAC address nobody has, which the
node's veth drops as "other host" (this kernel has neither tc actions nor netfilter, and a
blackhole route would not catch BIRD's BFD, which is sent with MSG_DONTROUTE). The link stays up,
no RST or FIN reaches the node and its TCP notices nothing, as when a peer's control plane freezes
or a middle box eats the traffic. Cases, measured in the same run:

  * agent_bfd:  the agent, BFD 100 ms x 3 to both peers, kernel nexthop objects on;
  * bird_bfd:   BIRD in `node` (the reference: what a user would pick instead), BFD 100 ms x 3,
                `protocol kernel` with `merge paths on` installing the ECMP routes itself;
  * agent_hold: the agent without BFD: the BGP hold timer (9 s) notices; nexthop objects on.

All sessions use hold time 9 s. `repair_s` is the time from installing the drop until every
sampled prefix (SAMPLES spread over the table) resolves through 10.1.0.1 only: one `ip -batch`
of ``route get`` per poll (the kernel's own forwarding decision, the ECMP hash included), polled
every POLL s (the poll costs ~5 ms of CPU). `writes_to_repair` are the kernel writes the node's
routing daemon made between the drop and that moment: for the agent its own netlink operation
counter (route and nexthop messages), for BIRD the route notifications of proto bird an
`ip monitor route` saw (BIRD writes each route once). net.ipv4.nexthop_compat_mode=0 in `node`,
so the kernel does not re-announce every route of a replaced group. The last line is JSON with
`repair_s`, `writes_to_repair`, `ref_repair_s` (BIRD) and `ratio` (agent_bfd / bird_bfd).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import threading
import time
from contextlib import ExitStack

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from testlab.benchlab import (  # noqa: E402
    PatientBird, finish, launch_agent, loadavg, min_median, prefix_text, ratio, rounds, setup,
    static_s4, table_routes, work_directory, write_agent_yaml)
from testlab.bird import bgp_protocol  # noqa: E402
from testlab.netns import api_get, ip, namespace, sysctl, veth_between, wait_for  # noqa: E402

NODE_AS, PEER_AS = 65000, 65001
LINKS = {"a": ("a0", "10.1.0.254", "10.1.0.1"), "b": ("b0", "10.2.0.254", "10.2.0.1")}
HOLD = 9
SAMPLES = 64
POLL = 0.01
BFD_MS, BFD_MULT = 100, 3
CASES = ("agent_bfd", "bird_bfd", "agent_hold")
# the BgpPeer fragment that turns BFD on (agent/config/bgp.py)
AGENT_BFD = f"  bfd:\n    minRx: {BFD_MS}\n    minTx: {BFD_MS}\n    multiplier: {BFD_MULT}\n"
BIRD_BFD = (f"protocol bfd {{\n  interface \"*\" {{ min rx interval {BFD_MS} ms; "
            f"min tx interval {BFD_MS} ms; multiplier {BFD_MULT}; }};\n}}\n")


def peer_config(side: str, n: int, bfd: bool) -> str:
    _dev, node_addr, addr = LINKS[side]
    return (f"router id {addr};\nlog stderr {{ warning, error, fatal, bug }};\n"
            "protocol device { scan time 10; }\n" + (BIRD_BFD if bfd else "")
            + static_s4(f"{prefix_text(i)} blackhole" for i in range(n))
            + bgp_protocol("n4", local=addr, local_as=PEER_AS, neighbor=node_addr, neighbor_as=NODE_AS,
                           export={4: ""}, import_all=False, hold_time=HOLD, passive=True,
                           graceful_restart=False, extra="    bfd on;" if bfd else ""))


def node_bird_config() -> str:
    protos = "".join(
        bgp_protocol(f"up_{side}", local=node_addr, local_as=NODE_AS, neighbor=addr, neighbor_as=PEER_AS,
                     hold_time=HOLD, graceful_restart=False, extra="    bfd on;")
        for side, (_dev, node_addr, addr) in LINKS.items())
    return ("router id 10.1.0.254;\nlog stderr { warning, error, fatal, bug };\n"
            "protocol device { scan time 10; }\n" + BIRD_BFD
            + "protocol kernel k4 { scan time 60; merge paths on; ipv4 { import none; export all; }; }\n"
            + protos)


def agent_config(bfd: bool) -> str:
    head = ("apiVersion: routeagent.io/v1alpha1\nkind: AgentConfig\nmetadata:\n  name: node\n"
            "spec:\n  fib:\n    nexthopObjects: \"on\"\n    fullScanSeconds: 3600\n")
    peers = "".join(
        f"---\napiVersion: routeagent.io/v1alpha1\nkind: BgpPeer\nmetadata:\n  name: tor-{side}\nspec:\n"
        f"  peerAddress: \"{addr}\"\n  peerAS: {PEER_AS}\n  localAS: {NODE_AS}\n  routerId: 10.1.0.254\n"
        f"  localAddress: \"{node_addr}\"\n  holdTime: {HOLD}\n  importPolicy: acceptAll\n"
        + (AGENT_BFD if bfd else "")
        for side, (_dev, node_addr, addr) in LINKS.items())
    return head + peers


def route_get(ns: str, addrs: list[str]) -> list[str]:
    """The gateway the kernel picks for each address (one `ip -batch`, so one fork per poll)."""
    out = subprocess.run(["ip", "-n", ns, "-batch", "-"], input="".join(f"route get {a}\n" for a in addrs),
                         capture_output=True, text=True, check=False).stdout
    return re.findall(r"via (\S+)", out)


def agent_writes(ns: str) -> int:
    text = api_get(ns, "/metrics") or ""
    return int(sum(float(v) for v in re.findall(r'route_agent_netlink_operations_total\{[^}]*\} (\S+)', text)))


class RouteEvents(threading.Thread):
    """`ip monitor route` in `ns`: the monotonic read time of each notification of proto bird."""

    def __init__(self, ns: str) -> None:
        super().__init__(daemon=True)
        self.proc = subprocess.Popen(["ip", "-n", ns, "monitor", "route"], stdout=subprocess.PIPE, text=True)
        self.times: list[float] = []

    def run(self) -> None:
        for line in self.proc.stdout:
            if "proto bird" in line:
                self.times.append(time.monotonic())

    def close(self) -> None:
        self.proc.kill()
        self.proc.wait()


def measure(case: str, n: int, workdir: str, timeout: float) -> dict:
    os.makedirs(workdir, exist_ok=True)
    samples = [prefix_text(i).replace(".0/24", ".1") for i in range(0, n, max(1, n // SAMPLES))][:SAMPLES]
    survivor, dead = LINKS["a"][2], LINKS["b"][2]
    bfd = case != "agent_hold"
    with ExitStack() as stack:
        node = stack.enter_context(namespace("ra-fo-n-"))
        sysctl(node, "net.ipv4.nexthop_compat_mode=0")
        peers = {}
        for side, (dev, node_addr, addr) in LINKS.items():
            pns = stack.enter_context(namespace(f"ra-fo-{side}-"))
            veth_between(node, dev, f"{node_addr}/24", pns, "n0", f"{addr}/24")
            peers[side] = pns
        birds = {side: stack.enter_context(PatientBird(pns, os.path.join(workdir, side), peer_config(side, n, bfd)))
                 for side, pns in peers.items()}
        wait_for(lambda: all(table_routes(b) >= n for b in birds.values()), timeout, 0.5, what="peers loaded")
        if case == "bird_bfd":
            stack.enter_context(PatientBird(node, os.path.join(workdir, "node"), node_bird_config()))
            writes = None
        else:
            confdir = os.path.join(workdir, "conf")
            write_agent_yaml(confdir, agent_config(bfd))
            launch_agent(node, ["--config", confdir, "--state-dir", os.path.join(workdir, "state")],
                         os.path.join(workdir, "agent.log"), stack)
            writes = agent_writes
        t_load = time.monotonic()
        wait_for(lambda: set(route_get(node, samples)) == {survivor, dead}, timeout, 0.5,
                 what="ECMP through both peers")
        # every route, not only the samples, must be ECMP before the drop
        wait_for(lambda: all(len(set(route_get(node, [p.replace(".0/24", f".{h}") for h in range(1, 40)]))) == 2
                             for p in (prefix_text(n - 1), prefix_text(n // 2))), timeout, 0.5, what="last routes ECMP")
        if bfd:  # both peers' BFD sessions Up (seen from their side), else BFD cannot notice anything
            wait_for(lambda: all(re.search(r"\bUp\b", b.command("show bfd sessions")) for b in birds.values()),
                     timeout, 0.2, what="BFD sessions up")
        loaded_s = time.monotonic() - t_load
        events = RouteEvents(node) if writes is None else None
        if events:
            events.start()
            stack.callback(events.close)
        before = writes(node) if writes else 0
        t0 = time.monotonic()
        ip(peers["b"], "neigh", "replace", LINKS["b"][1], "lladdr", "02:00:00:00:00:99", "dev", "n0", "nud", "permanent")
        deadline = t0 + timeout
        while True:
            got = route_get(node, samples)
            t = time.monotonic()
            if len(got) == len(samples) and dead not in got:
                break
            if t > deadline:
                raise TimeoutError(f"{case}: still forwarding through {dead} after {timeout} s")
            time.sleep(POLL)
        repair = t - t0
        if writes:
            w = writes(node) - before
        else:
            w = sum(1 for x in events.times if x <= t)
        return {"case": case, "routes": n, "repair_s": round(repair, 3), "writes_to_repair": w,
                "loaded_s": round(loaded_s, 1), "load": loadavg()}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--routes", type=int, default=100000)
    ap.add_argument("--only", default=",".join(CASES), help="cases, comma-separated: " + ", ".join(CASES))
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--timeout", type=float, default=600)
    ap.add_argument("--keep", action="store_true")
    args = ap.parse_args()
    if not setup("failover"):
        return 2
    cases = [c for c in args.only.split(",") if c]
    runs: dict[str, list[dict]] = {c: [] for c in cases}
    with work_directory("failover-", args.keep) as workdir:
        for _rep, case, d in rounds(workdir, args.repeat, [(c, c) for c in cases], args.keep):
            r = measure(case, args.routes, d, args.timeout)
            print(json.dumps(r), flush=True)
            runs[case].append(r)
    result: dict = {"routes": args.routes, "repeat": args.repeat}
    for case, rs in runs.items():
        lo, med = min_median([r["repair_s"] for r in rs])
        result[case] = {"repair_s_min": lo, "repair_s_median": med,
                        "writes_to_repair": max(r["writes_to_repair"] for r in rs)}
    if "agent_bfd" in runs:
        result["repair_s"] = result["agent_bfd"]["repair_s_min"]
        result["writes_to_repair"] = result["agent_bfd"]["writes_to_repair"]
    if "bird_bfd" in runs:
        result["ref_repair_s"] = result["bird_bfd"]["repair_s_min"]
    if "repair_s" in result and "ref_repair_s" in result:
        result["ratio"] = ratio(result["repair_s"], result["ref_repair_s"])
    return finish(result)


if __name__ == "__main__":
    sys.exit(main())
