#!/usr/bin/env python3
"""Fault suite (issue 12, "A fault suite that keeps this true"): the real agent, its real ExaBGP and
a real BIRD 2 peer in network namespaces, under kills, storms, flaps and bad configurations.

Not run by CI. Needs root (namespaces), BIRD 2 (/usr/sbin/bird, birdc) and the project's venv.
Run from the checkout:

    PYTHONPATH=. .venv/bin/python bench/chaos.py                       # defaults: ~10 minutes
    PYTHONPATH=. .venv/bin/python bench/chaos.py --only kill-agent,bad-configs
    PYTHONPATH=. .venv/bin/python bench/chaos.py --full                # the issue's sizes: ~45-60 min

It prints human-readable progress and, as its LAST line, one JSON object of figures (one key per
scenario that ran; a scenario that failed has "error"). Exit status 0 when every scenario ran
(figures that show bugs do not change the status), 1 when one of them failed to run.

Lab (bench/chaos_lab.py): namespace `tor` with BIRD (10.0.0.1, AS 65001, graceful restart on,
exports its static protocols), namespace `node` with the agent (10.0.0.254, AS 65000, peer
importPolicy acceptAll, its API on 127.0.0.1:9180 inside `node`), one veth pair between them and a
spare veth `flap0` in `node`. Each scenario builds its own lab and tears it down in `finally`
(processes in both namespaces are SIGKILLed by pid, then the namespaces deleted). "Settled" means:
the agent answers, route_agent_ready is 1, the BGP session is up, no stale BGP routes, no pending
or stale FIB routes, and the kernel's proto-201 routes (a netlink dump from a thread inside
`node`) equal what BIRD exports (``birdc show route export n4``), without duplicates.

Scenarios (`--only NAME,...`; default sizes in brackets, the issue's full sizes after "full"):

1. kill-agent: BIRD announces `--prefixes` [20,000; full 50,000] /24s in two static protocols, the
   `--toggled` [5,000; full 10,000] of the second toggled with ``birdc disable/enable`` every
   `--churn-period` [3 s]. The agent is SIGKILLed at random moments (0.3 s ... `--kill-max-delay`
   after its previous start, so also during start-up and re-sync) and restarted at once,
   `--agent-kills` [5] times. After the churn stops: `missing`, `stale`, `duplicates` (kernel vs
   BIRD's export; all should be 0) and `settle_s`. Then `--quiet-restarts` [2] quiet restarts (no
   churn; `ip monitor route` started after testlab.netns.settle, SIGKILL, restart, settled, a
   marker route to flush the monitor): `restart_route_events` (should be 0).
2. kill-exabgp: same table and churn; the agent's ExaBGP child (found among the agent's children
   in /proc) is SIGKILLed `--exabgp-kills` [4; full 10] times, each once the session is up again.
   A sampler counts the kernel's proto-201 routes every 0.25 s. `min_routes_during` is the fewest
   seen between a kill and the session being up with no stale routes again; `min_base_routes_during`
   the fewest of the never-toggled prefixes (must stay `base_routes`: under graceful restart the
   routes of a dead speaker stay in the kernel, stale). After settling: `failed_routes` (the
   /metrics gauge route_agent_fib_failed_routes) and `stale` (should be 0). ExaBGP restarts back off
   1, 2, 4 ... 30 s inside the agent, so the full 10 kills take ~3 minutes of backoff alone.
3. monitor-overflow: BIRD announces `--overflow-prefixes` [20,000]; fullScanSeconds is 3600, so
   only an overrun can trigger a re-scan. Storm 1: `--storm` [200,000] foreign /32s (proto 250)
   added with one ``ip -batch`` while the agent runs. Storm 2 (the agent SIGSTOPped, so its 32 MiB
   monitor buffer surely overflows): 100 of its routes deleted behind its back, a stray proto-201
   route added, `--storm` more foreign routes; SIGCONT. `overruns` = the increase of
   route_agent_kernel_resyncs_total{reason="overrun"} (the agent has no separate overrun counter;
   each ENOBUFS queues one such resync), per storm and in total (should be >= 1); `repair_s` the
   time until the kernel is exact again after SIGCONT; `missing`/`stale`/`duplicates` afterwards
   (should be 0; the deleted routes and the stray one are only found by the full resync).
4. scan-during-batch: fullScanSeconds 1, `flap0` taken down and up every `--flap-period` [0.5 s]
   (each link-down queues a full scan), while BIRD announces and withdraws `--batch` [50,000;
   full 100,000] prefixes `--rounds` [2] times (enable/disable of one static protocol: the agent
   writes them in big FIB batches). A thread inside `node` GETs /healthz every ~100 ms (5 s
   timeout): `healthz_max_ms`, `healthz_p99_ms`, `healthz_p50_ms`, `samples`, `timeouts` (not
   answered within 5 s), and per round the seconds to install and to remove.
5. bad-configs: `--bad-configs` [200; full 500] configurations from bench/chaos_configs.py
   (mutations of a valid config checked to be rejected by the agent's own loader, plus empty files,
   binary garbage, unsafe YAML tags, deep nesting, `--huge-mb` [4] MiB files and alias bombs) are
   written atomically into the config directory (hidden temporary file + rename), every second one
   followed by SIGHUP, the others picked up by the agent's 1 s poll. The outcome is read from the
   agent's log ("configuration rejected" / "configuration reloaded"), within `--reload-timeout`
   [30 s]. `crashes` (agent exited; restarted with the good config), `exceptions` (the reload
   raised: a traceback in the log, neither "rejected" nor "reloaded"; the agent kept running),
   `hangs` (no outcome in time and /healthz silent: killed and restarted), `no_outcome` (no
   outcome in time but /healthz answers), `kernel_changed` (rejected configs after which the kernel's proto-201
   routes, compared as full `ip -j route` entries, differ from before), `route_events_rejected`
   (`ip monitor route` lines while rejected configs were being handled), `accepted_bad` (non-empty
   bad configs the agent took) and, separately, `empty_config_accepted` (empty files taken as a
   configuration without routes: today the agent deletes every route; being made a rejection);
   `accepted_changed_kernel` counts the accepted ones after which the kernel changed within 5 s.
6. memory-cycles: `--cycles` [5; full 10] announce/withdraw cycles (enable/disable of one BIRD
   static protocol) of `--mem-prefixes` [20,000; full 200,000] prefixes, once with one shared
   attribute set (`shared`) and once with one community per prefix (`community`), each in a fresh
   lab. After each withdraw (kernel empty, nothing pending): RSS of the agent and, separately, of
   its ExaBGP child (+ its API relay). `rss_growth_pct` = agent RSS growth from cycle 2 to the last.
   Bound: 10 %. Cycle 1 is excluded because it grows pymalloc arenas, dict tables and the
   intern tables to their working size once; after that, each cycle reuses the same memory, so
   growth comes only from fragmentation (a few %), while a real leak of even 30 bytes per prefix
   per cycle (a kept tuple, an attribute set never dropped) adds 30 B x 200k x 8 cycles = 48 MiB,
   far more than 10 % of the agent's ~100 MiB at the full size. (`exabgp_growth_pct` likewise,
   reported, not bounded: ExaBGP is not ours.)

Timing at the defaults, measured on a shared 2-core machine: kill-agent ~45 s, kill-exabgp ~1 min,
monitor-overflow ~35 s-2 min (the ``ip -batch`` of 2 x 200k routes depends on the load),
scan-during-batch ~75 s (a frozen agent costs the `--stuck-timeout` of 60 s), bad-configs ~3 min,
memory-cycles ~3 min (a withdraw that leaves routes behind costs 60 s once, then 15 s).
A stuck or failing step is bounded by its deadline and reported; it never hangs the run.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import shutil
import signal
import sys
import tempfile
import threading
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, ROOT)
sys.path.insert(0, HERE)

from chaos_lab import (  # noqa: E402
    NODE_ADDR, NODE_AS, TOR_ADDR, TOR_AS, HOLD_TIME, ChaosLab, Churn, NsWorker, RouteMonitor, agent_yaml,
    bird_export, foreign_text, http_get, ip, ip_json, log, metric_sum, percentile, prefix_text, static_block,
    tor_config, wait_for,
)

SCENARIOS = ("kill-agent", "kill-exabgp", "monitor-overflow", "scan-during-batch", "bad-configs", "memory-cycles")
FULL = {"prefixes": 50000, "toggled": 10000, "agent_kills": 5, "exabgp_kills": 10, "storm": 200000,
        "batch": 100000, "bad_configs": 500, "mem_prefixes": 200000, "cycles": 10}


# ------------------------------------------------------------------------------------------------
# shared pieces

def churn_lab(args, workdir: str, name: str) -> tuple[ChaosLab, list[str], list[str]]:
    """A lab whose BIRD announces `args.prefixes`, the last `args.toggled` in protocol s_tog; the
    agent started and settled on the whole table."""
    n, t = args.prefixes, min(args.toggled, args.prefixes)
    base = [prefix_text(i) for i in range(n - t)]
    tog = [prefix_text(i) for i in range(n - t, n)]
    lab = ChaosLab(workdir, name)
    try:
        lab.start_bird(tor_config(static_block("s_base", base) + static_block("s_tog", tog)), loaded=n)
        lab.write_config(agent_yaml(stale=args.stale_seconds))
        t0 = time.monotonic()
        lab.start_agent()
        ok, secs = lab.wait_settled(set(base) | set(tog), args.settle_timeout, "initial convergence")
        if not ok:
            raise TimeoutError(f"the agent did not converge on {n} routes in {args.settle_timeout}s: "
                               f"{lab.compare(set(base) | set(tog))}")
        log(f"  {n} routes learned and installed in {time.monotonic() - t0:.1f}s from the agent's start")
        return lab, base, tog
    except BaseException:
        lab.close()
        raise


def final_settle(lab: ChaosLab, churn: Churn, base: list[str], tog: list[str], timeout: float) -> tuple[set, dict]:
    """After the churn: BIRD's export to the agent (polled until its session is up and the export
    is what the churn left enabled) and the settle."""
    want = set(base) | (set(tog) if churn.enabled else set())
    try:
        expected = wait_for(lambda: (lambda e: e if e == want else None)(bird_export(lab.bird)), 60, 0.5,
                            what="BIRD export to the agent after the churn")
    except TimeoutError:
        expected = bird_export(lab.bird)
        log(f"  WARNING: BIRD's export ({None if expected is None else len(expected)}) is not what the "
            f"churn left enabled ({len(want)}); comparing with the latter")
        expected = want
    ok, secs = lab.wait_settled(expected, timeout, "settle")
    out = lab.compare(expected)
    out.update(settled=ok, settle_s=round(secs, 1))
    return expected, out


# ------------------------------------------------------------------------------------------------
# 1. kill-agent

def kill_agent(args, workdir: str) -> dict:
    lab, base, tog = churn_lab(args, workdir, "kill-agent")
    res: dict = {"prefixes": args.prefixes, "toggled": len(tog)}
    churn = None
    try:
        rng = random.Random(args.seed)
        churn = Churn(lab.bird, "s_tog", args.churn_period, args.seed)
        churn.start()
        moments = []
        for k in range(args.agent_kills):
            delay = rng.uniform(0.3, args.kill_max_delay)
            time.sleep(delay)  # the random moment of the kill (pacing, not synchronisation)
            lab.kill_agent()
            moments.append(round(delay, 2))
            ours, _ = lab.kernel_routes()
            log(f"  kill {k + 1}/{args.agent_kills}: SIGKILL {delay:.1f}s after start; "
                f"{len(ours)} routes of ours in the kernel; restarting")
            lab.start_agent()
        time.sleep(rng.uniform(0.3, args.kill_max_delay))  # the last incarnation under churn too
        churn.close()
        res.update(kills=len(moments), kill_moments_s=moments, toggles=churn.toggles, churn_error=churn.error)
        expected, figures = final_settle(lab, churn, base, tog, args.settle_timeout)
        res.update(figures)
        log(f"  after churn: expected {len(expected)}, missing {figures['missing']}, stale {figures['stale']}, "
            f"duplicates {figures['duplicates']}, settled={figures['settled']} in {figures['settle_s']}s")
        m = lab.metrics() or {}
        res["failed_routes"] = m.get("route_agent_fib_failed_routes")
        events = []
        for q in range(args.quiet_restarts):
            mon = RouteMonitor(lab.node)
            try:
                lab.kill_agent()
                lab.start_agent()
                ok, secs = lab.wait_settled(expected, args.settle_timeout, "quiet restart")
                mon.mark()
                ev = mon.events()
            finally:
                mon.close()
            events.append(len(ev))
            log(f"  quiet restart {q + 1}/{args.quiet_restarts}: settled={ok} in {secs:.1f}s, "
                f"{len(ev)} route events{': ' + '; '.join(ev[:3]) if ev else ''}")
        res.update(restart_route_events=sum(events), restart_route_events_each=events)
        final = lab.compare(expected)
        res["after_quiet"] = {k: final[k] for k in ("missing", "stale", "duplicates")}
        res["agent_starts"] = lab.agent_starts
        return res
    finally:
        if churn is not None:
            churn.close()
        lab.close()


# ------------------------------------------------------------------------------------------------
# 2. kill-exabgp

class CountSampler(threading.Thread):
    """Counts the kernel's proto-201 routes (all, and the never-toggled ones) every `period` s
    from its own thread inside the namespace."""

    def __init__(self, lab: ChaosLab, below: int, period: float = 0.25) -> None:
        super().__init__(daemon=True, name="count-sampler")
        self.lab, self.below, self.period = lab, below, period
        self.worker = NsWorker(lab.node, "count")
        self.samples: list[tuple[float, int, int]] = []
        self.stop_ev = threading.Event()
        self.error = ""

    def run(self) -> None:
        try:
            while not self.stop_ev.is_set():
                total, low = self.lab.kernel_count(self.below, self.worker)
                self.samples.append((time.monotonic(), total, low))
                self.stop_ev.wait(self.period)
        except Exception as exc:
            self.error = repr(exc)

    def window(self, t0: float, t1: float) -> list[tuple[float, int, int]]:
        return [s for s in self.samples if t0 <= s[0] <= t1]

    def close(self) -> None:
        self.stop_ev.set()
        self.join(30)
        self.worker.close()


def kill_exabgp(args, workdir: str) -> dict:
    lab, base, tog = churn_lab(args, workdir, "kill-exabgp")
    res: dict = {"prefixes": args.prefixes, "toggled": len(tog), "base_routes": len(base)}
    churn = sampler = None
    try:
        rng = random.Random(args.seed + 1)
        sampler = CountSampler(lab, len(base))
        sampler.start()
        churn = Churn(lab.bird, "s_tog", args.churn_period, args.seed + 1)
        churn.start()
        mins, base_mins, downs = [], [], []

        def session_up_pid():
            m = lab.metrics()
            pid = lab.exabgp_pid()
            return pid if m and metric_sum(m, "route_agent_bgp_session_up") >= 1 and pid else None

        for k in range(args.exabgp_kills):
            pid = wait_for(session_up_pid, 120, 0.2, what="ExaBGP up with its session")
            time.sleep(rng.uniform(0.5, args.kill_max_delay))  # a random moment (pacing)
            pid = lab.exabgp_pid() or pid
            t0 = time.monotonic()
            os.kill(pid, signal.SIGKILL)

            def back():
                m = lab.metrics()
                new = lab.exabgp_pid()
                return (new and new != pid and m and metric_sum(m, "route_agent_bgp_session_up") >= 1
                        and metric_sum(m, "route_agent_bgp_stale_routes") == 0)
            try:
                wait_for(back, 150, 0.2, what="ExaBGP restarted, session up, no stale routes")
                recovered = True
            except TimeoutError:
                recovered = False
            t1 = time.monotonic()
            time.sleep(0.3)  # one more sample after recovery
            win = sampler.window(t0, t1 + 0.3)
            lo = min((s[1] for s in win), default=None)
            lo_base = min((s[2] for s in win), default=None)
            mins.append(lo)
            base_mins.append(lo_base)
            downs.append(round(t1 - t0, 1))
            log(f"  kill {k + 1}/{args.exabgp_kills}: ExaBGP pid {pid} SIGKILLed; back in {t1 - t0:.1f}s"
                f"{'' if recovered else ' (NOT recovered)'}; fewest routes meanwhile {lo} "
                f"(never-toggled {lo_base}/{len(base)}; {len(win)} samples)")
        churn.close()
        res.update(kills=args.exabgp_kills, toggles=churn.toggles, down_s=downs,
                   min_routes_each=mins, min_base_routes_each=base_mins,
                   min_routes_during=min((m for m in mins if m is not None), default=None),
                   min_base_routes_during=min((m for m in base_mins if m is not None), default=None),
                   samples=len(sampler.samples), sampler_error=sampler.error, churn_error=churn.error)
        expected, figures = final_settle(lab, churn, base, tog, args.settle_timeout)
        m = lab.metrics() or {}
        res.update(figures, failed_routes=m.get("route_agent_fib_failed_routes"),
                   exabgp_restarts=metric_sum(m, "route_agent_exabgp_restarts_total"))
        log(f"  after churn: missing {figures['missing']}, stale {figures['stale']}, duplicates "
            f"{figures['duplicates']}, failed_routes {res['failed_routes']}, settled={figures['settled']}")
        return res
    finally:
        if churn is not None:
            churn.close()
        if sampler is not None:
            sampler.close()
        lab.close()


# ------------------------------------------------------------------------------------------------
# 3. monitor-overflow

def _batch_file(path: str, start: int, count: int) -> str:
    with open(path, "w") as f:
        for i in range(start, start + count):
            f.write(f"route add blackhole {foreign_text(i)} proto 250\n")
    return path


def monitor_overflow(args, workdir: str) -> dict:
    n = args.overflow_prefixes
    lab = ChaosLab(workdir, "monitor-overflow")
    res: dict = {"prefixes": n, "storm": args.storm}
    try:
        prefixes = [prefix_text(i) for i in range(n)]
        lab.start_bird(tor_config(static_block("s4", prefixes)), loaded=n)
        lab.write_config(agent_yaml(full_scan=3600, stale=args.stale_seconds))
        lab.start_agent()
        expected = set(prefixes)
        ok, secs = lab.wait_settled(expected, args.settle_timeout, "initial convergence")
        if not ok:
            raise TimeoutError(f"no initial convergence: {lab.compare(expected)}")

        def overruns() -> float:
            m = lab.metrics() or {}
            return m.get('route_agent_kernel_resyncs_total{reason="overrun"}', 0.0)

        # storm 1: the agent running
        o0 = overruns()
        path = _batch_file(os.path.join(lab.dir, "storm1.batch"), 0, args.storm)
        t0 = time.monotonic()
        ip(lab.node, "-batch", path)
        t_add = time.monotonic() - t0
        ok1, secs1 = lab.wait_settled(expected, args.settle_timeout, "settle after storm 1")
        o1 = overruns()
        _, foreign = lab.kernel_routes()
        res["storm1"] = {"added_s": round(t_add, 2), "overruns": o1 - o0, "settled": ok1,
                         "settle_s": round(secs1, 1), "foreign_routes": foreign}
        log(f"  storm 1: {args.storm} foreign routes added in {t_add:.1f}s with the agent running; "
            f"overruns +{o1 - o0:g}; settled={ok1} in {secs1:.1f}s")
        # storm 2: the agent stopped, changes to its own routes hidden in the overflow
        victims = sorted(expected)[: min(100, n)]
        with open(os.path.join(lab.dir, "victims.batch"), "w") as f:
            for p in victims:
                f.write(f"route del {p} proto 201\n")
            f.write("route add blackhole 10.201.0.0/24 proto 201 metric 20\n")
        path2 = _batch_file(os.path.join(lab.dir, "storm2.batch"), args.storm, args.storm)
        os.kill(lab.proc.pid, signal.SIGSTOP)
        try:
            ip(lab.node, "-batch", os.path.join(lab.dir, "victims.batch"))
            ip(lab.node, "-batch", path2)
        finally:
            os.kill(lab.proc.pid, signal.SIGCONT)
        t0 = time.monotonic()
        ok2, secs2 = lab.wait_settled(expected, args.stuck_timeout, "repair after storm 2")
        o2 = overruns()
        figures = lab.compare(expected)
        res["storm2"] = {"overruns": o2 - o1, "settled": ok2, "repair_s": round(secs2, 1),
                         "deleted_behind_its_back": len(victims), "stray_added": 1}
        log(f"  storm 2 (agent SIGSTOPped): {len(victims)} of its routes deleted, 1 stray added, "
            f"{args.storm} more foreign routes; overruns +{o2 - o1:g}; exact again={ok2} after {secs2:.1f}s")
        m = lab.metrics() or {}
        res.update(figures, overruns=o2 - o0, repair_s=round(secs2, 1),
                   resyncs={k.split('"')[1]: v for k, v in m.items() if k.startswith("route_agent_kernel_resyncs_total{")},
                   failed_routes=m.get("route_agent_fib_failed_routes"))
        log(f"  afterwards: missing {figures['missing']}, stale {figures['stale']}, duplicates {figures['duplicates']}")
        return res
    finally:
        lab.close()


# ------------------------------------------------------------------------------------------------
# 4. scan-during-batch

class HealthSampler(threading.Thread):
    """GET /healthz every ~100 ms from a thread inside `node`; answer times in ms."""

    def __init__(self, ns: str, period: float = 0.1, timeout: float = 5.0) -> None:
        super().__init__(daemon=True, name="healthz-sampler")
        self.worker = NsWorker(ns, "healthz")
        self.period, self.timeout = period, timeout
        self.ms: list[float] = []
        self.timeouts = 0
        self.errors = 0
        self.stop_ev = threading.Event()

    def _one(self) -> tuple[float, bool]:
        t0 = time.monotonic()
        r = http_get("/healthz", self.timeout)
        dt = time.monotonic() - t0
        return dt * 1000, r is not None and r[0] == 200

    def run(self) -> None:
        while not self.stop_ev.is_set():
            ms, ok = self.worker.call(self._one, timeout=self.timeout + 30)
            if not ok:
                if ms >= self.timeout * 1000 * 0.99:
                    self.timeouts += 1
                else:
                    self.errors += 1  # refused (agent not listening): not a latency sample
                    self.stop_ev.wait(self.period)
                    continue
            self.ms.append(ms)
            self.stop_ev.wait(max(0.0, self.period - ms / 1000))

    def close(self) -> None:
        self.stop_ev.set()
        self.join(40)
        self.worker.close()


class Flapper(threading.Thread):
    def __init__(self, ns: str, dev: str, period: float) -> None:
        super().__init__(daemon=True, name="flapper")
        self.ns, self.dev, self.period = ns, dev, period
        self.flaps = 0
        self.stop_ev = threading.Event()
        self.error = ""

    def run(self) -> None:
        try:
            while not self.stop_ev.wait(self.period / 2):  # pacing
                ip(self.ns, "link", "set", self.dev, "down")
                self.stop_ev.wait(self.period / 2)
                ip(self.ns, "link", "set", self.dev, "up")
                self.flaps += 1
        except Exception as exc:
            self.error = repr(exc)

    def close(self) -> None:
        self.stop_ev.set()
        self.join(30)
        try:
            ip(self.ns, "link", "set", self.dev, "up")
        except Exception:
            pass


def scan_during_batch(args, workdir: str) -> dict:
    n = args.batch
    lab = ChaosLab(workdir, "scan-during-batch")
    res: dict = {"batch": n, "rounds": args.rounds, "flap_period_s": args.flap_period, "full_scan_s": 1}
    health = flapper = None
    try:
        prefixes = [prefix_text(i) for i in range(n)]
        lab.start_bird(tor_config(static_block("s_big", prefixes, disabled=True)))
        lab.write_config(agent_yaml(full_scan=1, stale=args.stale_seconds))
        lab.start_agent()
        ok, _ = lab.wait_settled(set(), args.settle_timeout, "agent up, nothing announced")
        if not ok:
            raise TimeoutError("agent did not come up")
        health = HealthSampler(lab.node)
        health.start()
        flapper = Flapper(lab.node, "flap0", args.flap_period)
        flapper.start()
        rounds = []
        for r in range(args.rounds):
            one = {}
            for action, target in (("enable", n), ("disable", 0)):
                t0 = time.monotonic()
                lab.bird.cmd(action, "s_big")
                try:
                    wait_for(lambda: lab.kernel_count()[0] == target, args.stuck_timeout, 0.5,
                             what=f"{target} routes of ours")
                    one["install_s" if target else "remove_s"] = round(time.monotonic() - t0, 1)
                except TimeoutError:
                    one["install_s" if target else "remove_s"] = None
                    one["stuck_at"] = lab.kernel_count()[0]
                    one["agent_alive"] = lab.alive()
                log(f"  round {r + 1}: {action} {n}: {one.get('install_s' if target else 'remove_s')}s; "
                    f"healthz so far max {max(health.ms, default=0):.0f} ms, {health.timeouts} timeouts")
                if "stuck_at" in one:
                    break
            rounds.append(one)
            if "stuck_at" in one:
                break
        flapper.close()
        health.close()
        m = lab.metrics() or {}
        res.update(
            rounds_detail=rounds, flaps=flapper.flaps, samples=len(health.ms), timeouts=health.timeouts,
            refused=health.errors,
            healthz_max_ms=round(max(health.ms, default=0), 1), healthz_p99_ms=round(percentile(health.ms, 99), 1),
            healthz_p50_ms=round(percentile(health.ms, 50), 1),
            resyncs={k.split('"')[1]: v for k, v in m.items() if k.startswith("route_agent_kernel_resyncs_total{")},
            failed_routes=m.get("route_agent_fib_failed_routes"), agent_alive=lab.alive(),
            flap_error=flapper.error)
        log(f"  /healthz: {len(health.ms)} samples, max {res['healthz_max_ms']} ms, p99 {res['healthz_p99_ms']} ms, "
            f"p50 {res['healthz_p50_ms']} ms, {health.timeouts} timeouts; {flapper.flaps} flaps")
        return res
    finally:
        if flapper is not None:
            flapper.close()
        if health is not None:
            health.close()
        lab.close()


# ------------------------------------------------------------------------------------------------
# 5. bad-configs

class LogOutcomes:
    """Counts the agent's reload outcomes in its log (read incrementally)."""

    PATTERN = re.compile(r"configuration (rejected|reloaded)|(Traceback) \(most recent call last\)")

    def __init__(self, path: str) -> None:
        self.path = path
        self.offset = 0
        self.counts = {"rejected": 0, "reloaded": 0, "Traceback": 0}
        self._tail = b""

    def poll(self) -> dict[str, int]:
        try:
            with open(self.path, "rb") as f:
                f.seek(self.offset)
                data = f.read()
        except OSError:
            return dict(self.counts)
        self.offset += len(data)
        text = (self._tail + data).decode("utf-8", "replace")
        cut = text.rfind("\n") + 1
        self._tail = text[cut:].encode()
        for m in self.PATTERN.finditer(text[:cut]):
            self.counts[m.group(1) or m.group(2)] += 1
        return dict(self.counts)


def _snapshot(ns: str) -> list[str]:
    return sorted(json.dumps(r, sort_keys=True) for r in ip_json(ns, "-4", "route", "show", "table", "main",
                                                                 "proto", "201"))


def bad_configs(args, workdir: str) -> dict:
    from chaos_configs import dump, generate, valid_docs

    lab = ChaosLab(workdir, "bad-configs")
    res: dict = {}
    mon = None
    try:
        n_bgp = 200
        prefixes = [prefix_text(i) for i in range(n_bgp)]
        lab.start_bird(tor_config(static_block("s4", prefixes)), loaded=n_bgp)
        docs = valid_docs(TOR_ADDR, TOR_AS, NODE_ADDR, NODE_AS, HOLD_TIME)
        docs[0]["spec"]["fib"]["staleSeconds"] = args.stale_seconds
        good = dump(docs)
        statics = {r["prefix"] for r in docs[2]["spec"]["routes"]}
        expected = set(prefixes) | statics
        lab.write_config(good)
        lab.start_agent()
        ok, _ = lab.wait_settled(expected, args.settle_timeout, "initial convergence")
        if not ok:
            raise TimeoutError(f"no initial convergence: {lab.compare(expected)}")
        t0 = time.monotonic()
        mutants = generate(args.bad_configs, args.seed, args.huge_mb, docs)
        log(f"  {len(mutants)} bad configs generated in {time.monotonic() - t0:.1f}s "
            f"({', '.join(f'{k} {v}' for k, v in sorted(_count_kinds(mutants).items()))})")
        baseline = _snapshot(lab.node)
        outcomes = LogOutcomes(lab.agent_log)
        outcomes.poll()
        mon = RouteMonitor(lab.node)
        crashes, hangs, changed, accepted, empty_ok, events_rejected = [], [], [], [], 0, 0
        exceptions, silent, accepted_changed = [], [], []
        by_outcome = {"rejected": 0, "accepted": 0, "exception": 0, "crash": 0, "hang": 0, "no_outcome": 0}

        def recover(why: str) -> None:
            """Good config back, agent (re)started if needed, settled on the baseline again."""
            lab.write_config(good)
            if not lab.alive():
                lab.start_agent()
            else:
                before = outcomes.poll()["reloaded"]
                os.kill(lab.proc.pid, signal.SIGHUP)
                wait_for(lambda: outcomes.poll()["reloaded"] > before, args.reload_timeout, 0.05,
                         what="good config reloaded")
            ok, secs = lab.wait_settled(expected, args.settle_timeout, f"recovery after {why}")
            if not ok:
                raise TimeoutError(f"no recovery after {why}: {lab.compare(expected)}")
            mon.mark()

        t_start = time.monotonic()
        for i, (kind, data) in enumerate(mutants):
            before = outcomes.poll()
            n_events = len(mon.events())
            lab.write_config(data)
            how = "sighup" if i % 2 == 0 else "poll"
            if how == "sighup":
                os.kill(lab.proc.pid, signal.SIGHUP)
            deadline = time.monotonic() + args.reload_timeout
            outcome = None
            while outcome is None:
                now = outcomes.poll()
                if now["rejected"] > before["rejected"]:
                    outcome = "rejected"
                elif now["reloaded"] > before["reloaded"]:
                    outcome = "accepted"
                elif not lab.alive():
                    outcome = "crash"
                elif now["Traceback"] > before["Traceback"]:
                    # the reload raised: an exit (crash) follows at once when it killed the agent
                    try:
                        wait_for(lambda: not lab.alive(), 10, 0.05)  # shutdown stops ExaBGP (<= 5 s)
                        outcome = "crash"
                    except TimeoutError:
                        outcome = "exception"  # logged, and the agent kept running
                elif time.monotonic() > deadline:
                    outcome = "hang"
                else:
                    time.sleep(0.02)  # polling interval of the outcome
            by_outcome[outcome] += 1
            label = f"#{i} {kind} ({len(data)} bytes, {how})"
            if outcome == "rejected":
                if _snapshot(lab.node) != baseline:
                    changed.append(label)
                    log(f"  {label}: rejected, but the kernel's routes changed")
                mon.mark()
                events_rejected += len(mon.events()) - n_events
            elif outcome == "accepted":
                if kind == "empty":
                    empty_ok += 1
                else:
                    accepted.append(label)
                try:  # what taking it did to the kernel (an empty config: every route deleted)
                    wait_for(lambda: _snapshot(lab.node) != baseline, 5, 0.2)
                    now_routes = len(_snapshot(lab.node))
                    accepted_changed.append(f"{label}: {len(baseline)} -> {now_routes} routes")
                    effect = f"the kernel changed ({len(baseline)} -> {now_routes} routes)"
                except TimeoutError:
                    effect = "the kernel unchanged after 5 s"
                log(f"  {label}: ACCEPTED, {effect}; restoring the good config")
                recover(label)
            elif outcome == "exception":
                time.sleep(0.5)  # let the traceback be written completely (pacing of the log read)
                text = lab.agent_log_text()
                last = text[text.rfind("Traceback"):].splitlines()
                err = next((l for l in reversed(last) if re.match(r"\s*\|?\s*\w+(Error|Exception)", l)), "?")
                exceptions.append(f"{label}: {err.strip()[:160]}")
                log(f"  {label}: the reload raised ({err.strip()[:160]}); agent alive={lab.alive()}; "
                    "restoring the good config")
                recover(label)
            elif outcome == "crash":
                code = lab.proc.returncode
                tail = "\n".join(lab.agent_log_text().rstrip().splitlines()[-4:])[-800:]
                crashes.append(f"{label}: exit {code}")
                log(f"  {label}: AGENT EXITED with {code}; log tail:\n{tail}")
                recover(label)
            else:
                healthy = lab.api("/healthz", 5) is not None
                if healthy:
                    by_outcome["hang"] -= 1
                    by_outcome["no_outcome"] += 1
                    silent.append(label)
                else:
                    hangs.append(label)
                log(f"  {label}: no outcome in {args.reload_timeout}s (healthz "
                    f"{'answers' if healthy else 'silent'}); killing and restarting the agent")
                lab.kill_agent()
                recover(label)
            if (i + 1) % 50 == 0:
                log(f"  {i + 1}/{len(mutants)} configs: {by_outcome}")
        mon.mark()
        final = lab.compare(expected)
        res.update(configs=len(mutants), seconds=round(time.monotonic() - t_start, 1), outcomes=by_outcome,
                   crashes=len(crashes), crash_list=crashes, hangs=len(hangs), hang_list=hangs,
                   exceptions=len(exceptions), exception_list=exceptions, no_outcome=len(silent),
                   no_outcome_list=silent,
                   kernel_changed=len(changed), kernel_changed_list=changed[:20],
                   route_events_rejected=events_rejected, accepted_bad=len(accepted),
                   accepted_bad_list=accepted[:20], empty_config_accepted=empty_ok,
                   accepted_changed_kernel=len(accepted_changed), accepted_changed_list=accepted_changed[:20],
                   kinds=_count_kinds(mutants), final={k: final[k] for k in ("missing", "stale", "duplicates")},
                   agent_starts=lab.agent_starts)
        log(f"  {len(mutants)} configs: {by_outcome}; kernel_changed {len(changed)}, empty accepted {empty_ok}")
        return res
    finally:
        if mon is not None:
            mon.close()
        lab.close()


def _count_kinds(mutants) -> dict[str, int]:
    out: dict[str, int] = {}
    for kind, _ in mutants:
        out[kind] = out.get(kind, 0) + 1
    return out


# ------------------------------------------------------------------------------------------------
# 6. memory-cycles

def memory_variant(args, workdir: str, variant: str) -> dict:
    n = args.mem_prefixes
    lab = ChaosLab(workdir, f"memory-{variant}")
    try:
        prefixes = [prefix_text(i) for i in range(n)]
        lab.start_bird(tor_config(static_block("s_mem", prefixes, disabled=True,
                                               community_base=0 if variant == "community" else None)))
        lab.write_config(agent_yaml(stale=args.stale_seconds))
        lab.start_agent()
        ok, _ = lab.wait_settled(set(), args.settle_timeout, "agent up")
        if not ok:
            raise TimeoutError("agent did not come up")
        agent_rss, exa_rss, times, leftovers = [], [], [], []
        deadline = args.stuck_timeout
        for c in range(args.cycles):
            t0 = time.monotonic()
            lab.bird.cmd("enable", "s_mem")
            wait_for(lambda: lab.kernel_count()[0] >= n, args.settle_timeout, 0.5, what=f"{n} routes installed")
            t1 = time.monotonic()
            peak = lab.rss_kib()
            lab.bird.cmd("disable", "s_mem")
            ok, _ = lab.wait_settled(set(), deadline, "withdrawn")
            t2 = time.monotonic()
            left = None
            if not ok:  # routes left behind: report them and go on (later cycles wait less)
                m = lab.metrics() or {}
                left = {"kernel_routes": lab.kernel_count()[0], "failed": m.get("route_agent_fib_failed_routes"),
                        "pending": m.get("route_agent_fib_pending_routes")}
                leftovers.append({"cycle": c + 1, **left})
                deadline = 15
            a, e = lab.rss_kib()
            agent_rss.append(round(a / 1024, 1))
            exa_rss.append(round(e / 1024, 1))
            times.append((round(t1 - t0, 1), round(t2 - t1, 1)))
            log(f"  {variant} cycle {c + 1}/{args.cycles}: announce {t1 - t0:.1f}s, withdraw {t2 - t1:.1f}s"
                f"{f' NOT COMPLETE: {left}' if left else ''}; RSS at {n} routes: agent {peak[0] / 1024:.1f} MiB; "
                f"after withdraw: agent {a / 1024:.1f} MiB, ExaBGP {e / 1024:.1f} MiB")

        def growth(series):
            if len(series) < 3 or not series[1]:
                return None
            return round((series[-1] - series[1]) / series[1] * 100, 1)
        return {"prefixes": n, "cycles": args.cycles, "agent_rss_mib": agent_rss, "exabgp_rss_mib": exa_rss,
                "announce_withdraw_s": times, "rss_growth_pct": growth(agent_rss),
                "exabgp_growth_pct": growth(exa_rss), "bound_pct": 10, "incomplete_withdraws": leftovers,
                "within_bound": (growth(agent_rss) or 0) <= 10}
    finally:
        lab.close()


def memory_cycles(args, workdir: str) -> dict:
    res = {v: memory_variant(args, workdir, v) for v in ("shared", "community")}
    res["rss_growth_pct"] = max((r["rss_growth_pct"] for r in res.values() if r["rss_growth_pct"] is not None),
                                default=None)
    res["incomplete_withdraws"] = sum(len(r["incomplete_withdraws"]) for r in res.values() if isinstance(r, dict))
    return res


# ------------------------------------------------------------------------------------------------

RUNNERS = {"kill-agent": kill_agent, "kill-exabgp": kill_exabgp, "monitor-overflow": monitor_overflow,
           "scan-during-batch": scan_during_batch, "bad-configs": bad_configs, "memory-cycles": memory_cycles}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--only", default=",".join(SCENARIOS), help="comma list of: " + ", ".join(SCENARIOS))
    ap.add_argument("--full", action="store_true", help="the issue's sizes: " + json.dumps(FULL))
    ap.add_argument("--seed", type=int, default=12)
    ap.add_argument("--prefixes", type=int, default=20000, help="kill-agent/kill-exabgp table size")
    ap.add_argument("--toggled", type=int, default=5000, help="of which toggled by the churn")
    ap.add_argument("--churn-period", type=float, default=3.0, help="seconds between toggles")
    ap.add_argument("--agent-kills", type=int, default=5)
    ap.add_argument("--kill-max-delay", type=float, default=8.0, help="latest kill moment after a (re)start, s")
    ap.add_argument("--quiet-restarts", type=int, default=2)
    ap.add_argument("--exabgp-kills", type=int, default=4)
    ap.add_argument("--overflow-prefixes", type=int, default=20000)
    ap.add_argument("--storm", type=int, default=200000, help="foreign routes per storm")
    ap.add_argument("--batch", type=int, default=50000, help="scan-during-batch: routes per batch")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--flap-period", type=float, default=0.5)
    ap.add_argument("--bad-configs", type=int, default=200)
    ap.add_argument("--huge-mb", type=float, default=4.0)
    ap.add_argument("--reload-timeout", type=float, default=30.0)
    ap.add_argument("--mem-prefixes", type=int, default=20000)
    ap.add_argument("--cycles", type=int, default=5)
    ap.add_argument("--stale-seconds", type=int, default=60, help="the agent's fib.staleSeconds")
    ap.add_argument("--settle-timeout", type=float, default=180.0, help="deadline of a convergence, s")
    ap.add_argument("--stuck-timeout", type=float, default=60.0,
                    help="deadline of a batch (scan-during-batch) and of the repair after storm 2, s")
    ap.add_argument("--keep", action="store_true", help="keep the work directory (logs, configs)")
    args = ap.parse_args()
    if args.full:
        for k, v in FULL.items():
            setattr(args, k, max(getattr(args, k), v))
    if os.geteuid() != 0:
        print("chaos: needs root (network namespaces)", file=sys.stderr)
        return 2
    only = [s.strip() for s in args.only.split(",") if s.strip()]
    unknown = [s for s in only if s not in RUNNERS]
    if unknown:
        ap.error(f"unknown scenario(s) {unknown}; known: {', '.join(SCENARIOS)}")

    def terminate(signum, frame):  # SIGTERM/SIGHUP: unwind, so every scenario's cleanup runs
        raise SystemExit(128 + signum)

    signal.signal(signal.SIGTERM, terminate)
    signal.signal(signal.SIGHUP, terminate)
    workdir = tempfile.mkdtemp(prefix="chaos-")
    result: dict = {"bench": "chaos", "seed": args.seed}
    ok = True
    try:
        for name in [s for s in SCENARIOS if s in only]:
            log(f"== {name}")
            t0 = time.monotonic()
            try:
                r = RUNNERS[name](args, workdir)
            except Exception as exc:
                traceback.print_exc()
                r = {"error": f"{type(exc).__name__}: {exc}"[:2000]}
                ok = False
            r["seconds"] = round(time.monotonic() - t0, 1)
            result[name.replace("-", "_")] = r
            log(f"== {name}: {json.dumps(r)[:600]}")
    finally:
        if args.keep:
            log(f"work directory kept: {workdir}")
        else:
            shutil.rmtree(workdir, ignore_errors=True)
    print(json.dumps(result))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
