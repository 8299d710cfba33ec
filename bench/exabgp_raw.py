#!/usr/bin/env python3
"""Benchmark: ExaBGP's own CPU per received UPDATE, unpatched vs through the launcher (json, raw).

A BIRD 2 ToR in namespace `peer` (testlab/benchlab.py `Lab`) announces N IPv4 /24s to ExaBGP in
namespace `node`, started with the configuration and environment the agent would generate
(`benchlab.launch_exabgp`) in one of three modes, each in fresh namespaces, in the same run:

  * stock: ``python -m exabgp`` (ExaBGP 5.0.15 unpatched), JSON lines;
  * json:  the launcher (`agent/speaker/launcher.py`) without --raw-updates: ExaBGP still decodes
           every UPDATE and writes JSON, with the per-message fixes (batched reads, no debug-log
           lambdas, no asyncio loop per turn);
  * raw:   the launcher with --raw-updates: ``raw-update PEER CAPS HEX`` lines, no decoding.

Tables: ``distinct`` (default N = 20,000: each prefix with its own MED and a community, so one
UPDATE per prefix: the per-UPDATE cost) and ``shared`` (--shared N: one attribute set, BIRD packs
~800 prefixes per UPDATE). The API helper (this file, ``--helper``) reads every line, counts the
announced prefixes (JSON: json.loads; raw: the IPv4 NLRI lengths of the hex body) and reads
ExaBGP's CPU time (utime + stime of its parent, /proc) when the session comes up (the ``state
up`` line) and when the N-th prefix arrives: ExaBGP CPU = the difference, µs per UPDATE = that
divided by the UPDATEs seen. Wall time is from the up line to the N-th prefix. BIRD is poked
every 20 ms against its idle stall (design.md, section 5).

Output: one line per run, min / median per mode, then one JSON object (last line):
``{mode}_cpu_us_per_update`` (min), ``{mode}_seconds`` (min), RSS.

    sudo .venv/bin/python bench/exabgp_raw.py [--n 20000] [--shared 0] [--repeat 3] [--only stock,json,raw]
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import sys
import time

THIS = os.path.abspath(__file__)
sys.path.insert(0, os.path.dirname(os.path.dirname(THIS)))  # the repository (also with -S -E)

from testlab.benchlab import (  # noqa: E402  (stdlib only at import: the helper runs with -S -E)
    agent_yaml, common_options, finish, Lab, launch_exabgp, min_median, peer_bird_config, prefix_text, rounds,
    setup, work_directory,
)
from testlab.procstat import proc_cpu, proc_rss_mib  # noqa: E402

MODES = ("stock", "json", "raw")


# ------------------------------------------------------------------------------------------------
# the API helper (stdlib only: runs with -S -E)

def ipv4_nlri_count(body: bytes) -> int:
    """Announced IPv4 prefixes in an UPDATE body (no ADD-PATH)."""
    wlen = int.from_bytes(body[0:2], "big")
    alen = int.from_bytes(body[2 + wlen:4 + wlen], "big")
    i, count = 4 + wlen + alen, 0
    while i < len(body):
        i += 1 + (body[i] + 7) // 8
        count += 1
    return count


def helper(report_path: str, n: int) -> int:
    exabgp = os.getppid()
    loads = json.loads
    count = updates = 0
    cpu_up = t_up = None
    done = False
    for line in sys.stdin.buffer:
        if done:
            continue
        if line.startswith(b"raw-update "):
            updates += 1
            count += ipv4_nlri_count(bytes.fromhex(line.split(b" ", 3)[3].decode()))
        elif line.startswith(b"{"):
            msg = loads(line)
            if msg.get("type") == "state" and msg["neighbor"].get("state") == "up" and t_up is None:
                t_up, cpu_up = time.time(), proc_cpu(exabgp)
                continue
            if msg.get("type") != "update":
                continue
            updates += 1
            announce = msg["neighbor"]["message"].get("update", {}).get("announce")
            for by_next_hop in (announce or {}).values():
                for nlris in by_next_hop.values():
                    count += len(nlris)
        if count >= n and not done:
            done = True
            t_end = time.time()
            result = {"t_up": t_up, "t_end": t_end, "count": count, "updates": updates,
                      "exabgp_cpu_s": proc_cpu(exabgp) - (cpu_up or 0.0), "exabgp_rss_mib": proc_rss_mib(exabgp),
                      "helper_cpu_s": sum(os.times()[:2])}
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
                s.connect(report_path)
                s.sendall((json.dumps(result) + "\n").encode())
    return 0


# ------------------------------------------------------------------------------------------------
# one run

def tor_routes(n: int, distinct: bool) -> list[str]:
    if distinct:  # its own MED per route: one UPDATE per prefix
        return [f"{prefix_text(i)} blackhole {{ bgp_med = {i + 1}; bgp_community.add((65001, {i % 65536})); }}"
                for i in range(n)]
    return [f"{prefix_text(i)} blackhole" for i in range(n)]


def run_one(mode: str, n: int, distinct: bool, workdir: str, timeout: float) -> dict:
    from contextlib import ExitStack

    from testlab.bird import Poker

    with ExitStack() as stack:
        lab = Lab(os.path.join(workdir, "lab"), stack, peer_bird_config(tor_routes(n, distinct)), tag="xr")
        lab.wait_loaded(n)
        report = os.path.join(workdir, "report.sock")
        listener = stack.enter_context(socket.socket(socket.AF_UNIX, socket.SOCK_STREAM))
        listener.bind(report)
        listener.listen(1)
        argv = [sys.executable, "-S", "-E", THIS, "--helper", report, str(n)]
        launch_exabgp(workdir, lab.node, agent_yaml(), argv, os.path.join(workdir, "exabgp.log"), stack,
                      raw_updates=mode == "raw", launcher=None if mode == "stock" else ())
        poker = Poker([str(lab.bird.sock)])
        poker.start()
        stack.callback(poker.close)
        listener.settimeout(timeout)
        conn, _ = listener.accept()
        with conn:
            data = b""
            while not data.endswith(b"\n"):
                chunk = conn.recv(4096)
                if not chunk:
                    raise RuntimeError("the helper closed without reporting")
                data += chunk
        end = json.loads(data)
    return {"mode": mode, "table": "distinct" if distinct else "shared", "n": n, "count": end["count"],
            "updates": end["updates"], "seconds": end["t_end"] - end["t_up"],
            "exabgp_cpu_s": end["exabgp_cpu_s"],
            "cpu_us_per_update": end["exabgp_cpu_s"] / max(1, end["updates"]) * 1e6,
            "exabgp_rss_mib": round(end["exabgp_rss_mib"], 1), "helper_cpu_s": round(end["helper_cpu_s"], 2)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=int, default=20000, help="distinct-attribute prefixes (one UPDATE each); 0: skip")
    ap.add_argument("--shared", type=int, default=0, help="shared-attribute prefixes (0: skip)")
    common_options(ap, runs_of="each mode", only=",".join(MODES), only_help="modes (comma list)", profile_help="unused")
    ap.add_argument("--helper", nargs=2, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.helper:
        return helper(args.helper[0], int(args.helper[1]))
    if not setup("exabgp_raw"):
        return 2
    modes = [m for m in MODES if m in args.only.split(",")]
    tables = [(t, n) for t, n in (("distinct", args.n), ("shared", args.shared)) if n]
    runs: list[dict] = []
    with work_directory("exabgp-raw-", args.keep) as workdir:
        items = [(f"{t}-{m}", (t, n, m)) for t, n in tables for m in modes]
        for _, (table, n, mode), d in rounds(workdir, args.repeat, items, args.keep):
            r = run_one(mode, n, table == "distinct", d, args.timeout)
            runs.append(r)
            print(f"  {table:<8} {mode:<5} {r['n']:>7} prefixes in {r['updates']:>6} UPDATEs: {r['seconds']:6.3f}s, "
                  f"ExaBGP CPU {r['exabgp_cpu_s']:.2f}s ({r['cpu_us_per_update']:.1f} µs/UPDATE), "
                  f"RSS {r['exabgp_rss_mib']} MiB", flush=True)
    result: dict = {"bench": "exabgp_raw", "repeat": args.repeat}
    for table, n in tables:
        for mode in modes:
            mine = [r for r in runs if r["table"] == table and r["mode"] == mode]
            if not mine:
                continue
            us = min_median([r["cpu_us_per_update"] for r in mine])
            secs = min_median([r["seconds"] for r in mine])
            print(f"{table} {mode}: ExaBGP CPU per UPDATE min {us[0]:.1f} / median {us[1]:.1f} µs; "
                  f"wall min {secs[0]:.3f} / median {secs[1]:.3f} s")
            result[f"{table}_{mode}_cpu_us_per_update"] = round(us[0], 1)
            result[f"{table}_{mode}_cpu_us_per_update_median"] = round(us[1], 1)
            result[f"{table}_{mode}_seconds"] = round(secs[0], 3)
            result[f"{table}_{mode}_rss_mib"] = max(r["exabgp_rss_mib"] for r in mine)
    return finish(result)


if __name__ == "__main__":
    sys.exit(main())
