#!/usr/bin/env python3
"""Benchmark: a table announced by a BIRD peer, learned into the kernel, vs two references.

A BIRD 2 "ToR" in namespace `peer` (10.0.0.1, AS 65001, passive) announces a table over one eBGP
session to a receiver in namespace `node` (10.0.0.254, AS 65000), joined by a veth pair. Tables
(`--only`, comma list; all by default):

  * shared:    N = 100,000 IPv4 /24s with one attribute set (BIRD packs them into few UPDATEs);
  * shared500: the same with N = 500,000;
  * distinct:  N = 20,000 /24s, each with its own MED (a per-route attribute block in BIRD's static
               protocol), so every prefix travels in an UPDATE of its own;
  * full:      an Internet-like table from testlab/feed.py: 1,000,000 IPv4 + 200,000 IPv6 prefixes
               (times --scale) with the public prefix-length distribution, realistic overlap,
               ~2.5 prefixes per attribute set (so per UPDATE), AS paths of 1-10 4-octet-capable
               hops, communities on 75 % and large communities on 12 % of the sets (the model is in
               that module's docstring). IPv6 routes share the IPv4 session (MP-BGP, next hop
               fd00::1 on the link), so there is still one session and one start point.

Three receivers (`--receivers`), each measured in the same run, in fresh namespaces with a freshly
started ToR:

  * agent:        the real agent (`route-agent run --config DIR --state-dir DIR`, its real
                  ExaBGP child, import policy acceptAll) -> all N routes in the kernel (proto 201);
  * bird:         reference (a), BIRD -> BIRD -> kernel: a second BIRD in `node` with a kernel
                  protocol per family exporting everything -> all N routes in the kernel (proto bird);
  * exabgp_alone: reference (b), ExaBGP with the configuration and environment the agent would
                  generate (`agent.speaker.exabgp_conf.render`, same interpreter choice), whose API
                  helper only reads and json-decodes the lines, counts announced prefixes and
                  UPDATE messages -> N prefixes seen. Its UPDATE count shows how BIRD grouped the
                  table (`prefixes_per_update`).

--updates json|raw (BgpSpeaker `spec.updates`) says how ExaBGP hands UPDATEs over, to the agent
and to ExaBGP alone alike: json (the default; ExaBGP decodes them) or raw (hex bytes: the agent
decodes them; ExaBGP alone's helper only counts the NLRI, IPv4 and MP_REACH).

Start point: the BGP session reaching Established, as logged by the ToR BIRD (its trace line
"n4: State changed to up", microsecond timestamps). It is the same event for every receiver and
excludes what differs for reasons unrelated to learning: process start-up, BIRD's connect delay,
ExaBGP's connect retry. The ToR has loaded the whole table before any receiver is started (a full
table's configuration takes BIRD ~20 s and ~3.4 GB; that is not measured). The time from launching
the receiver is printed too, as `launch`.

End point: the moment the N-th route of the receiver's protocol is in the kernel, seen by a watcher
process inside `node` that counts the kernel's route notifications for that protocol without
reading them (testlab/fibwatch.py: a filtered netlink socket's drop counter, one getsockopt every
10 ms, every 2 ms for the last 5 %; ~0.07 CPU-s per 100k routes), confirmed by a netlink dump
counting that protocol's routes in both families; for ExaBGP alone, the moment the helper has
decoded the N-th announced prefix. (Until this version the watcher polled /proc/net/fib_triestat,
which walks the whole FIB trie: ~90 ms per read at 1M routes, 2.5 CPU-s of a 500k run.)

Pitfalls from design.md applied: both BIRDs get a `show status` on their control socket every
20 ms during a measurement (on a kept-open control connection, not a birdc process each time),
removing BIRD's idle stall; net.ipv4.tcp_rmem/tcp_wmem are raised in both namespaces. The lab
(namespaces, BIRD configs, launching the agent and ExaBGP, /proc figures, the run loop) is
testlab/benchlab.py; the BIRD poker is testlab/bird.py, the kernel route watcher
testlab/fibwatch.py, the full table testlab/feed.py. This file keeps what it measures: the
receivers, ExaBGP alone's helper, the end points and the report.

RSS: agent and its ExaBGP child (and the relay helper) from /proc at the end point of every table
(ExaBGP runs with `adj-rib-in false`, so its RSS should not grow with the table); for the full
table also the agent's bytes per route, as RSS / routes and as the growth from the last sample
before the session came up (sampled every 0.2 s), and once more when the agent is done with the
load: after it logged giving the allocator's free pages back (`agent.daemon.core`, one second
after its last pass of the load; at most 15 s after the end point), which is what it keeps. CPU seconds per process during each run show
where the time goes, and the seconds each receiver process spent runnable but waiting for a core
(/proc/PID/schedstat) with the machine's load average before and after each run show how much
other work on the same cores skewed it. For the agent, the CPU it used while learning (from its
last sample before Established to the end point; user, system, and its main thread, which runs
the core task: the rest is the FIB writer's threads and the kernel's work in them) says whether
it was busy all along or waiting (on ExaBGP, on a core). --profile DIR adds one cProfile'd agent run per table (not
timed) and prints the top functions.

Output: one line per run, min / median per receiver and table, then as the last line one JSON
object with, per table, `ratio_bird_<table>` (agent / BIRD->BIRD->kernel, best runs) and
`ratio_exabgp_<table>` (agent / ExaBGP alone), the targets of issue 13 (`target_ratio_bird_*`),
with more than one run also `ratio_bird_<table>_pairs` (each agent run / the BIRD run of the same
round, the two a minute apart) and their median `ratio_bird_<table>_median_pair`: the machine's
speed drifts by up to 30 % within minutes, which moves the ratio of two minimums taken minutes
apart more than it moves a pair,
`ratio_bird` / `ratio_exabgp` the worst over the tables run, and `ratio` = `ratio_exabgp`.

    sudo .venv/bin/python bench/bgp_learn.py [--only shared,distinct,full] [--scale 0.2] [--repeat 3]
                                             [--updates raw] [--receivers agent,bird]
                                             [--nexthop-objects auto|on|off]
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import sys
import time
from dataclasses import dataclass

THIS = os.path.abspath(__file__)
sys.path.insert(0, os.path.dirname(os.path.dirname(THIS)))  # the repository: testlab, agent (also with -S -E)

from testlab.benchlab import (  # noqa: E402  (stdlib only at import: the helpers run with -S -E)
    PROTO_AGENT, PROTO_BIRD, agent_log_times, agent_pids, agent_yaml, common_options, finish, Lab, launch_agent, launch_exabgp,
    loadavg, node_bird_config, notes, peer_bird_config, prefix_text, print_profile, profile_path, ratio, rounds,
    RssSampler, setup, static_s4, work_directory, write_agent_yaml,
)
from testlab.procstat import proc_cpu, proc_runq_wait, rss_mib, usage  # noqa: E402

TABLES = ("shared", "shared500", "distinct", "full")
TRIM_LINE = "allocator: free memory of a load given back"  # (agent.daemon.core)
TARGET_BIRD = {"shared": 1.2, "shared500": 1.2, "distinct": 4.0, "full": 2.0}  # issue 13
TARGET_BYTES_PER_ROUTE = 250


# ------------------------------------------------------------------------------------------------
# the API helper of the "ExaBGP alone" reference (stdlib only: runs with -S -E)

def raw_nlri_count(body: bytes) -> int:
    """Announced prefixes in an UPDATE body: IPv4 NLRI and MP_REACH_NLRI's (no ADD-PATH)."""
    wlen = int.from_bytes(body[0:2], "big")
    i = 2 + wlen
    alen = int.from_bytes(body[i:i + 2], "big")
    i, end, count = i + 2, i + 2 + alen, 0
    while i < end:
        flags, code = body[i], body[i + 1]
        if flags & 0x10:  # extended length
            length, i = int.from_bytes(body[i + 2:i + 4], "big"), i + 4
        else:
            length, i = body[i + 2], i + 3
        if code == 14:  # MP_REACH_NLRI: AFI, SAFI, next hop, reserved, NLRI
            j = i + 4 + body[i + 3] + 1
            while j < i + length:
                j += 1 + (body[j] + 7) // 8
                count += 1
        i += length
    while i < len(body):
        i += 1 + (body[i] + 7) // 8
        count += 1
    return count


def exabgp_helper(report_path: str, n: int) -> int:
    """ExaBGP's API process for the "ExaBGP alone" reference: read every line, json-decode it (or,
    with raw UPDATEs, count the NLRI in its hex body), count announced prefixes (an IPv6 NLRI
    listed under both the global and the link-local next hop counts once) and UPDATEs; report the
    time the N-th prefix was seen on a Unix socket; keep reading until ExaBGP closes the pipe (it
    freezes when its API pipe is not read)."""
    loads = json.loads
    report = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    report.connect(report_path)
    count = lines = updates = 0
    done = False
    for line in sys.stdin.buffer:
        lines += 1
        if done:
            continue
        if line.startswith(b"raw-update "):
            added = raw_nlri_count(bytes.fromhex(line.split(b" ", 3)[3].decode()))
            updates += added > 0
            count += added
        else:
            try:
                msg = loads(line)
            except ValueError:
                continue  # "done"/"error" acks are plain text (none expected: we send no commands)
            if msg.get("type") != "update":
                continue
            announce = msg["neighbor"]["message"].get("update", {}).get("announce")
            if not announce:
                continue
            updates += 1
            for by_next_hop in announce.values():
                count += max(len(nlris) for nlris in by_next_hop.values())
        if count >= n:
            done = True
            t = time.time()
            cpu = os.times()
            report.sendall((json.dumps({"t_end": t, "count": count, "lines": lines, "updates": updates,
                                        "cpu": cpu.user + cpu.system}) + "\n").encode())
    return 0


def helper_report(listener: socket.socket, timeout: float) -> dict:
    """The one line ExaBGP alone's helper sends at the N-th decoded prefix."""
    listener.settimeout(timeout)
    conn, _ = listener.accept()
    with conn:
        conn.settimeout(timeout)
        data = b""
        while not data.endswith(b"\n"):
            chunk = conn.recv(4096)
            if not chunk:
                raise RuntimeError("ExaBGP helper closed without reporting")
            data += chunk
    return json.loads(data)


# ------------------------------------------------------------------------------------------------
# the tables

@dataclass(frozen=True)
class Table:
    name: str
    n: int
    families: tuple[int, ...]
    tor: str  # the ToR's static protocols
    model: dict | None = None  # testlab.feed.stats of a generated table


def plain_table(name: str, n: int, distinct: bool) -> Table:
    if distinct:  # its own MED per route: one attribute set, so one UPDATE, per prefix
        routes = [f"{prefix_text(i)} blackhole {{ bgp_med = {i + 1}; }}" for i in range(n)]
    else:
        routes = [f"{prefix_text(i)} blackhole" for i in range(n)]
    return Table(name, n, (4,), static_s4(routes))


def full_table(scale: float, seed: int) -> Table:
    from testlab.feed import bird_static, scaled, stats

    t0 = time.monotonic()
    feed = scaled(scale, seed)
    text = bird_static(feed, 4) + bird_static(feed, 6)
    model = stats(feed)
    print(f"full table: {len(feed.v4)} IPv4 + {len(feed.v6)} IPv6 prefixes (seed {seed}), generated in "
          f"{time.monotonic() - t0:.1f}s; {describe_model(model)}", flush=True)
    return Table("full", len(feed), (4, 6), text, model)


def describe_model(model: dict) -> str:
    parts = []
    for fam, top in (("v4", 24), ("v6", 48)):
        m = model.get(fam)
        if m:
            parts.append(f"{fam}: /{top} {m['shares'].get(top, 0):.1f} %, mean length {m['mean_length']}, "
                         f"{m['more_specific_pct']} % more specifics, {m['attr_sets']} attribute sets "
                         f"({m['prefixes_per_set']} per set, largest {m['largest_set']}), mean AS path "
                         f"{m['mean_path_len']}, communities {m['communities_pct']} %, large "
                         f"{m['large_communities_pct']} %")
    return "; ".join(parts)


# ------------------------------------------------------------------------------------------------
# one run

SPEAKER = """---
apiVersion: routeagent.io/v1alpha1
kind: BgpSpeaker
metadata: {{name: speaker}}
spec: {{updates: {updates}}}
"""


def run_one(kind: str, table: Table, workdir: str, timeout: float, profile: str | None = None,
            updates: str = "raw", nexthop_objects: str = "auto") -> dict:
    """One measurement of receiver `kind` (agent | bird | exabgp_alone) in fresh namespaces; the
    agent and ExaBGP alone get UPDATEs from ExaBGP as `updates` (json | raw)."""
    from contextlib import ExitStack

    from testlab.bird import Bird, Poker
    from testlab.fibwatch import Watcher

    n, fams = table.n, table.families
    yaml_text = agent_yaml(families=fams, extra_docs=SPEAKER.format(updates=updates),
                           fib={"nexthopObjects": f'"{nexthop_objects}"'} if nexthop_objects != "auto" else None)
    with ExitStack() as stack:
        lab = Lab(os.path.join(workdir, "lab"), stack, peer_bird_config(statics=table.tor, families=fams),
                  tag="bl", ipv6=6 in fams)
        res: dict = {"kind": kind, "table": table.name, "n": n, "tor_load_s": round(lab.wait_loaded(n, 600), 1),
                     "load_before": loadavg(), "updates_mode": updates}
        cpu0 = proc_cpu(lab.bird.proc.pid)
        socks = [str(lab.bird.sock)]
        watcher = proc = node_bird = sampler = None
        if kind == "exabgp_alone":
            report = os.path.join(workdir, "report.sock")
            listener = stack.enter_context(socket.socket(socket.AF_UNIX, socket.SOCK_STREAM))
            listener.bind(report)
            listener.listen(1)
            helper = [sys.executable, "-S", "-E", THIS, "--exabgp-helper", report, str(n)]
            proc, t_launch = launch_exabgp(workdir, lab.node, yaml_text, helper,
                                           os.path.join(workdir, "exabgp.log"), stack)
        else:
            watcher = Watcher(lab.node, n, PROTO_AGENT if kind == "agent" else PROTO_BIRD, timeout)
            stack.callback(watcher.close)
            if kind == "agent":
                confdir = os.path.join(workdir, "config")
                write_agent_yaml(confdir, yaml_text)
                proc, t_launch = launch_agent(lab.node, ["--config", confdir, "--state-dir",
                                                         os.path.join(workdir, "state")],
                                              os.path.join(workdir, "agent.log"), stack, profile)
                sampler = RssSampler(proc.pid)
                sampler.start()
                stack.callback(sampler.close)
            else:
                t_launch = time.time()
                node_bird = Bird(lab.node, os.path.join(workdir, "node"), node_bird_config(families=fams))
                socks.append(str(node_bird.sock))
                # BIRD deletes its kernel routes one by one on SIGTERM: SIGKILL it first
                stack.callback(node_bird.close)
                stack.callback(lambda: node_bird.proc.poll() is None and (node_bird.proc.kill(), node_bird.proc.wait()))
        poker = Poker(socks)
        poker.start()
        stack.callback(poker.close)
        # ---- wait for the end point
        if kind == "exabgp_alone":
            end = helper_report(listener, timeout)
            res["helper_cpu_s"] = round(end["cpu"], 2)
            res["json_lines"], res["updates"] = end["lines"], end["updates"]
        else:
            end = watcher.result()
            res["watch_method"], res["dump_count"] = end["method"], end["dump_count"]
            res["watcher_cpu_s"] = round(end["cpu"], 2)
            if end["count"] < n:
                raise TimeoutError(f"{kind}: only {end['count']} of {n} routes in the kernel after {timeout}s")
        res["count"] = end["count"]
        cpu_end = sampler.sample() if sampler is not None else None
        # ---- resources at the end point (before anything is stopped)
        res["tor_bird_cpu_s"] = round(proc_cpu(lab.bird.proc.pid) - cpu0, 2)
        if kind == "agent":
            groups = agent_pids(proc.pid, os.path.join(workdir, "state"))
        elif kind == "exabgp_alone":
            groups = {"exabgp": [proc.pid]}
        else:
            groups = {"node_bird": [node_bird.proc.pid]}
        res.update(usage(groups))
        for name, pids in groups.items():  # since launch: time runnable but waiting for a core
            res[f"{name}_wait_s"] = round(sum(proc_runq_wait(p) for p in pids), 2)
        if kind == "agent" and watcher is not None:  # what it keeps once the load is over
            log_path, deadline = os.path.join(workdir, "agent.log"), time.monotonic() + 15
            while not agent_log_times(log_path, TRIM_LINE, end["t_end"]) and time.monotonic() < deadline:
                time.sleep(0.2)
            res["agent_rss_idle_mib"] = round(rss_mib([proc.pid]), 1)
        res["load_after"] = loadavg()
        poker.close()
        res["pokes"], res["poke_error"] = poker.count, poker.error
        ups = [t for t in lab.bird.established_at("n4") if t >= t_launch - 1]
        if not ups:
            raise RuntimeError("the ToR never logged its session as Established")
        res["sessions"] = len(ups)  # 1 unless the session flapped
        res["seconds"] = end["t_end"] - ups[0]
        res["launch_s"] = end["t_end"] - t_launch
        if sampler is not None:
            sampler.close()
            base = sampler.at(ups[0])
            if base is not None:
                res["agent_rss_base_mib"] = round(base, 1)
            cpu = sampler.cpu_since(ups[0], cpu_end)
            if cpu is not None:  # the agent's CPU while it learned (from the sample before Established)
                res["agent_learn_cpu"] = {k: round(v, 2) for k, v in cpu.items() if k != "since"}
                res["agent_learn_cpu"]["wall"] = round(end["t_end"] - cpu["since"], 2)
    return res


def describe(r: dict) -> str:
    extra = []
    for key in ("agent_cpu_s", "exabgp_cpu_s", "relay_cpu_s", "helper_cpu_s", "node_bird_cpu_s",
                "tor_bird_cpu_s", "watcher_cpu_s"):
        if key in r:
            extra.append(f"{key[:-6]} {r[key]}s")
    note = notes(r)
    c = r.get("agent_learn_cpu")
    if c:
        note += (f" [agent while learning: {c['user'] + c['sys']:.2f} CPU-s (user {c['user']:.2f}, sys {c['sys']:.2f};"
                 f" main thread {c['main']:.2f}) in {c['wall']:.2f} s]")
    if r.get("watch_method", "notifications") != "notifications":
        note += f" [watcher: {r['watch_method']}]"
    if r.get("poke_error"):
        note += f" [BIRD poke failed: {r['poke_error']}]"
    if r.get("updates"):
        note += f" [{r['updates']} UPDATEs, {r['n'] / r['updates']:.2f} prefixes each]"
    rss = [f"{k[:-8]} {r[k]} MiB" for k in ("agent_rss_mib", "exabgp_rss_mib", "node_bird_rss_mib") if k in r]
    waits = [f"{k[:-7]} {r[k]}s" for k in ("agent_wait_s", "exabgp_wait_s", "node_bird_wait_s") if k in r]
    load = "/".join(f"{x:.1f}" for x in r["load_before"][:1] + r["load_after"][:1])
    return (f"  {r['kind']:<13} {r['n']:>7} {r['table']:<9} {r['seconds']:7.3f}s "
            f"({r['n'] / r['seconds']:8.0f}/s; launch {r['launch_s']:.2f}s)  cpu: {', '.join(extra)}; "
            f"waited for a core: {', '.join(waits)}; rss: {', '.join(rss)}; load {load}{note}")


# ------------------------------------------------------------------------------------------------
# the report

def report(tables: list[Table], runs: list[dict], repeat: int) -> tuple[dict, bool]:
    """The summary lines and the result object (the last line); False when a dump came up short."""
    result: dict = {"bench": "bgp_learn", "repeat": repeat}
    ratios_exa, ratios_bird = [], []
    ok = True
    for table in tables:
        name, n = table.name, table.n
        result[f"n_{name}"] = n
        best = {}
        parts = []
        for kind, label in (("agent", "agent"), ("exabgp_alone", "ExaBGP alone"), ("bird", "BIRD->BIRD->kernel")):
            rs = [r for r in runs if r["kind"] == kind and r["table"] == name]
            if not rs:
                result[f"{kind}_{name}_s"] = None
                continue
            secs = [r["seconds"] for r in rs]
            best[kind] = min(rs, key=lambda r: r["seconds"])
            result[f"{kind}_{name}_s"] = round(min(secs), 3)
            result[f"{kind}_{name}_median_s"] = round(statistics.median(secs), 3)
            parts.append(f"{label} {min(secs):.3f}/{statistics.median(secs):.3f}s ({n / min(secs):.0f}/s)")
            for r in rs:
                if r.get("dump_count", n) < n:
                    ok = False
                    print(f"  WARNING: {kind} {name}: final dump shows {r['dump_count']} of {n} routes")
        line = f"{n} {name} (min/median): " + ", ".join(parts)
        a, e, b = best.get("agent"), best.get("exabgp_alone"), best.get("bird")
        if a and e:
            ratios_exa.append(ratio(a["seconds"], e["seconds"]))
            result[f"ratio_exabgp_{name}"] = ratios_exa[-1]
            line += f"; agent/ExaBGP alone {ratios_exa[-1]}"
        if a and b:
            ratios_bird.append(ratio(a["seconds"], b["seconds"]))
            result[f"ratio_bird_{name}"] = ratios_bird[-1]
            result[f"target_ratio_bird_{name}"] = TARGET_BIRD[name]
            line += f"; agent/BIRD {ratios_bird[-1]} (target <= {TARGET_BIRD[name]})"
            pairs = [ratio(x["seconds"], y["seconds"]) for x, y in zip(
                [r for r in runs if r["kind"] == "agent" and r["table"] == name],
                [r for r in runs if r["kind"] == "bird" and r["table"] == name])]
            if len(pairs) > 1:  # (each agent run beside the BIRD run of its round: steadier on a noisy machine)
                result[f"ratio_bird_{name}_pairs"] = pairs
                result[f"ratio_bird_{name}_median_pair"] = round(statistics.median(pairs), 2)
                line += f", median pair {result[f'ratio_bird_{name}_median_pair']} (pairs {', '.join(map(str, pairs))})"
        if e and e.get("updates"):
            result[f"prefixes_per_update_{name}"] = round(n / e["updates"], 3)
            line += f"; {e['updates']} UPDATEs ({n / e['updates']:.2f} prefixes each)"
        print(line)
        agent_runs = [r for r in runs if r["kind"] == "agent" and r["table"] == name]
        if agent_runs:
            for key in ("agent_rss_mib", "exabgp_rss_mib", "relay_rss_mib"):
                result[f"{key[:-4]}_{name}_mib"] = max(r[key] for r in agent_runs)
            line = (f"  RSS at {n} routes: agent {result[f'agent_rss_{name}_mib']} MiB, its ExaBGP "
                    f"{result[f'exabgp_rss_{name}_mib']} MiB (+ relay {result[f'relay_rss_{name}_mib']} MiB)")
            if name == "full":
                worst = max(agent_runs, key=lambda r: r["agent_rss_mib"])
                per_route = worst["agent_rss_mib"] * 2**20 / n
                result["agent_rss_bytes_per_route"] = round(per_route)
                result["target_rss_bytes_per_route"] = TARGET_BYTES_PER_ROUTE
                line += f"; agent {per_route:.0f} B/route (target <= {TARGET_BYTES_PER_ROUTE})"
                if "agent_rss_base_mib" in worst:
                    growth = (worst["agent_rss_mib"] - worst["agent_rss_base_mib"]) * 2**20 / n
                    result["agent_rss_growth_bytes_per_route"] = round(growth)
                    line += f", {growth:.0f} B/route above its {worst['agent_rss_base_mib']} MiB before the session"
                idle = [r["agent_rss_idle_mib"] for r in agent_runs if "agent_rss_idle_mib" in r]
                if idle:
                    result[f"agent_rss_idle_{name}_mib"] = max(idle)
                    result["agent_rss_idle_bytes_per_route"] = round(max(idle) * 2**20 / n)
                    line += (f"; once the load is over {max(idle)} MiB = {max(idle) * 2**20 / n:.0f} B/route "
                             f"(target <= {TARGET_BYTES_PER_ROUTE})")
            print(line)
        exa_runs = [r for r in runs if r["kind"] == "exabgp_alone" and r["table"] == name]
        if exa_runs:
            result[f"exabgp_alone_rss_{name}_mib"] = max(r["exabgp_rss_mib"] for r in exa_runs)
    if ratios_exa:
        result["ratio_exabgp"] = max(ratios_exa)
        result["ratio"] = result["ratio_exabgp"]
    if ratios_bird:
        result["ratio_bird"] = max(ratios_bird)
    loads = [r["load_before"][0] for r in runs] + [r["load_after"][0] for r in runs]
    if loads:
        result["load_min_max"] = [min(loads), max(loads)]
        print(f"machine load (1-min average) around the runs: {min(loads):.2f} .. {max(loads):.2f} "
              f"on {os.cpu_count()} CPUs")
    for table in tables:
        if table.model:
            result["model_full"] = {fam: {k: v for k, v in m.items() if k != "shares"}
                                    for fam, m in table.model.items() if fam in ("v4", "v6")}
    return result, ok


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--shared", type=int, default=100000, help="prefixes of the 'shared' table")
    ap.add_argument("--shared500", type=int, default=500000, help="prefixes of the 'shared500' table")
    ap.add_argument("--distinct", type=int, default=20000, help="prefixes of the 'distinct' table")
    ap.add_argument("--scale", type=float, default=1.0, help="size of the 'full' table (1.0: 1M IPv4 + 200k IPv6)")
    ap.add_argument("--seed", type=int, default=1, help="seed of the generated full table")
    ap.add_argument("--receivers", default="agent,exabgp_alone,bird", help="receivers to run (comma list)")
    ap.add_argument("--updates", choices=("json", "raw"), default="raw",
                    help="how ExaBGP hands UPDATEs to the agent and to ExaBGP alone's helper (BgpSpeaker spec.updates)")
    ap.add_argument("--nexthop-objects", choices=("auto", "on", "off"), default="auto",
                    help="the agent's spec.fib.nexthopObjects (auto: its default)")
    common_options(ap, runs_of="each receiver and table", only=",".join(TABLES),
                   only_help=f"tables to run (comma list of {', '.join(TABLES)})",
                   profile_help="also run the agent once per table under cProfile")
    ap.add_argument("--watch", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--proto", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--exabgp-helper", nargs=2, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.exabgp_helper:
        return exabgp_helper(args.exabgp_helper[0], int(args.exabgp_helper[1]))
    if args.watch is not None:  # the watcher, run by hand (the benchmark runs testlab/fibwatch.py)
        from testlab.fibwatch import watch_routes

        return watch_routes(args.watch, args.proto, args.timeout)
    wanted = [t.strip() for t in args.only.split(",") if t.strip()]
    if unknown := set(wanted) - set(TABLES):
        ap.error(f"unknown table(s) {', '.join(sorted(unknown))}; tables: {', '.join(TABLES)}")
    if not setup("bgp_learn"):
        return 2
    kinds = [k for k in ("agent", "exabgp_alone", "bird") if k in args.receivers.split(",")]
    sizes = {"shared": args.shared, "shared500": args.shared500, "distinct": args.distinct}
    tables = [full_table(args.scale, args.seed) if name == "full" else plain_table(name, sizes[name], name == "distinct")
              for name in TABLES if name in wanted]
    items = [(f"{kind}-{t.name}", (kind, t)) for t in tables for kind in kinds]
    runs: list[dict] = []
    with work_directory("bgp-learn-", args.keep) as workdir:
        print(f"bgp_learn: BIRD ToR -> receiver over one eBGP session; time from Established (ToR log) "
              f"to all N in the kernel (ExaBGP alone: N decoded); UPDATEs from ExaBGP as {args.updates}; "
              f"{args.repeat} run(s) each; load {loadavg()}", flush=True)
        for _, (kind, table), d in rounds(workdir, args.repeat, items, args.keep):
            r = run_one(kind, table, d, args.timeout * max(1.0, table.n / 500000), updates=args.updates,
                        nexthop_objects=args.nexthop_objects)
            runs.append(r)
            print(describe(r), flush=True)
        if args.profile:
            for table in tables:
                path = profile_path(args.profile, f"agent-{table.name}.prof")
                r = run_one("agent", table, os.path.join(workdir, f"profile-{table.name}"),
                            args.timeout * max(1.0, table.n / 500000), profile=path, updates=args.updates)
                print(f"cProfile of the agent, {table.n} {table.name} (not timed; {r['seconds']:.2f}s under the "
                      f"profiler): {path}")
                print_profile(path)
    result, ok = report(tables, runs, args.repeat)
    result["updates"] = args.updates
    result["nexthop_objects"] = args.nexthop_objects
    return finish(result, ok)


if __name__ == "__main__":
    sys.exit(main())
