#!/usr/bin/env python3
"""Benchmark: N advertisements exported by the agent to one BIRD peer, vs BIRD exporting the same.

A BIRD 2 receiver in namespace `peer` (10.0.0.1, AS 65001, passive, `import all`, `export none`,
no kernel protocol: it keeps what it learns in its table) and a sender in namespace `node`
(10.0.0.254, AS 65000), joined by a veth pair, over one eBGP session. Senders, each in fresh
namespaces with a freshly started receiver, in the same run:

  * agent:        the real agent (`route-agent run --config DIR --state-dir DIR`, its real ExaBGP
                  child) with one `Advertisement` of N IPv4 /24s (11.0.0.0/24, 11.0.1.0/24, ...;
                  several objects of <= 50,000 prefixes when N is larger) and a `BgpPeer` with
                  `exportPolicy: acceptAll`;
  * bird:         the reference, BIRD -> BIRD: a second BIRD in `node` with a static protocol of
                  the same N blackhole /24s and `export all` on its BGP session;
  * exabgp_alone: an extra reference (skip with --only agent,bird): ExaBGP started as the agent
                  starts it (its configuration, through the launcher: `agent/speaker/launcher.py`),
                  whose API helper writes the very command lines the agent would send, computed
                  by the agent's own export code (`neighbor 10.0.0.1 announce attributes
                  next-hop self nlri P1 ... P500`, ..., then End-of-RIB) as soon as ExaBGP
                  reports the session up. agent / exabgp_alone is the agent's own overhead on top
                  of ExaBGP. --launcher-options (e.g. "--async-limit 50") passes more options to
                  the launcher of this reference (the pacing variants), --stock runs it unpatched.

(1) Full table. Start point: the session reaching Established in the receiver's log (its trace
line "n4: State changed to up", microsecond timestamps). It is the same event for every sender,
and it excludes what differs for reasons that have nothing to do with exporting: process start-up
(the agent's config load is measured separately, below), BIRD's connect delay, ExaBGP's connect
retry. Every sender has its whole table before the session comes up (the agent computes its
desired advertisements at start-up; BIRD's static protocol is up long before its 1 s connect
delay). The time from launching the sender is printed too (`launch`).

End point: the receiver's count of routes imported over the session (`show protocols all n4`,
"Routes: N imported") reaching N, polled every 2 ms on a kept-open control-socket connection
(BIRD's reply is O(1), no table walk; a final `show route count` confirms). The same polling
pokes the receiver and, every 20 ms, `show status` pokes the sending BIRD: BIRD may hold back its
last UPDATE for up to ~3 s while idle (design.md, section 5). net.ipv4.tcp_rmem/wmem are raised in
both namespaces.

About the reference: BIRD sends the whole table within ~1 ms of Established, but the last UPDATE
then waits for the receiver's delayed ACK (Nagle): ~35-40 of the ~45 ms measured here. With
--quickack (`quickack 1` on both link routes: no delayed ACKs) BIRD -> BIRD takes ~10-20 ms. The
default keeps the kernel's defaults, which is what a real peering sees; the option shows the size of
that fixed cost.

(2) One change while N are announced (agent and BIRD): one prefix added to the configuration.
  * agent: the Advertisement file is rewritten (atomic rename) with N+1 prefixes and SIGHUP sent
    to the agent at once (the agent also polls its config every second; the start point is taken
    just before the rename, so either trigger is covered); end point: the receiver's count at N+1.
    The agent-internal part is split from its log ("configuration reloaded": the config is read
    and validated) and from the moment the command reaches ExaBGP's API helper (the relay's main
    thread, which only copies agent -> ExaBGP, changes its write counter in
    /proc/PID/task/PID/io; polled every 1 ms).
  * bird: the sender BIRD's config rewritten with N+1 static routes and `configure` sent on its
    control socket; end point the same.

Config load: `load_path` of the agent's configuration directory, timed in this process (best of
3), reported separately; it is inside the change time (the agent re-reads its whole config).

RSS of the agent (and its ExaBGP child and relay) once the N routes are at the receiver. CPU seconds
per process from the session coming up (as seen by the poller) to the end point show where the
time goes; CPU % of the idle sender with N announced is measured for 2 s before the change.
--profile DIR adds one cProfile'd agent run (not timed) and prints the top functions.

The lab (namespaces, BIRD configs, launching the agent and ExaBGP, /proc figures, the run loop) is
testlab/benchlab.py, the receiver's route counter testlab/bird.py (`ImportCounter`); this file keeps
what it measures: the senders, ExaBGP alone's helper, the change, config load and the report.

Output: human-readable lines, then as the last line one JSON object: `agent_s`, `ref_s` (BIRD ->
BIRD), `ratio` = agent_s / ref_s, `change_s` (agent), `ref_change_s` (BIRD), `exabgp_alone_s`,
`agent_rss_mib`, ... Best of --repeat for times, worst for RSS.

    sudo .venv/bin/python bench/export.py [--n 10000] [--repeat 1]
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import sys
import threading
import time

THIS = os.path.abspath(__file__)
sys.path.insert(0, os.path.dirname(os.path.dirname(THIS)))  # the repository: testlab, agent (also with -S -E)

from testlab.benchlab import (  # noqa: E402  (stdlib only at import: the helper runs with -S -E)
    PEER_ADDR, agent_log_times, agent_pids, agent_yaml, common_options, finish, keep_best, Lab, launch_agent,
    launch_exabgp, min_median, node_bird_config, notes, peer_bird_config, prefix_text, print_change_and_rss, print_profile,
    profile_path, ratio, rounds, setup, work_directory, worst, write_agent_yaml,
)
from testlab.procstat import WriteWatch, children, cpu_s, proc_runq_wait, rss_mib  # noqa: E402

IO_POLL_SECONDS = 0.001  # relay write counter during the change
IDLE_SECONDS = 2.0  # CPU of the idle sender measured over this long before the change
PER_OBJECT = 50000  # prefixes per Advertisement object (the schema allows 65536)
AGENT_YAML = agent_yaml(export=True)


# ------------------------------------------------------------------------------------------------
# the API helper of the "ExaBGP alone" reference (stdlib only: runs with -S -E)

def exabgp_helper(commands_path: str) -> int:
    """Drain ExaBGP's output all the time; once it reports the session up, write the prepared
    command lines (from a thread, as the agent's writer task does) in one go."""
    with open(commands_path, "rb") as f:
        commands = f.read()
    out = sys.stdout.buffer
    started = False

    def write() -> None:
        view = memoryview(commands)
        while view:  # batches of ~512 lines, like the agent's writer
            out.write(view[:512 * 48])
            out.flush()
            view = view[512 * 48:]

    for line in sys.stdin.buffer:
        if not started and b'"state": "up"' in line:
            started = True
            threading.Thread(target=write, daemon=True).start()
    return 0


def agent_commands(confdir: str) -> list[str]:
    """The command lines the agent sends when the session comes up, from its own export code
    (desired advertisements, the export reconciler's grouping: one ``announce attributes`` per
    500 prefixes sharing attributes, then End-of-RIB)."""
    from agent.config.loader import load_path
    from agent.daemon.bgp import BgpRuntime, peer_key
    from agent.export.desired import desired_for_peer
    from agent.export.reconciler import ExportReconciler
    from agent.policy.engine import compile_policies
    from agent.speaker.encoder import encode

    config = load_path(confdir)
    (peer,) = config.peers
    address, export_peer = peer_key(peer), BgpRuntime._export_peer(None, peer)
    reconciler = ExportReconciler()
    reconciler.configure(address, peer.spec.local_as, peer.spec.ebgp)
    desired, _ = desired_for_peer(export_peer, config.adverts, compile_policies(config.policies))
    reconciler.set_desired(address, desired)
    return [encode(c) for c in reconciler.session_up(address, export_peer.families)]


def exabgp_alone_helper(workdir: str, n: int) -> list[str]:
    """The helper's argv, with the command lines the agent would send (`agent_commands`)
    prepared in a file."""
    confdir = os.path.join(workdir, "alone-config")
    write_config(confdir, n)
    commands = os.path.join(workdir, "commands.txt")
    with open(commands, "w") as f:
        f.writelines(line + "\n" for line in agent_commands(confdir))
    return [sys.executable, "-S", "-E", THIS, "--exabgp-helper", commands]


# ------------------------------------------------------------------------------------------------
# the senders' configurations

def sender_config(n: int) -> str:
    """The reference sender: BIRD with the same N /24s as static blackholes."""
    return node_bird_config([f"{prefix_text(i)} blackhole" for i in range(n)])


def adverts_yaml(n: int) -> str:
    docs = []
    for k, start in enumerate(range(0, n, PER_OBJECT)):
        items = "".join(f"  - {prefix_text(i)}\n" for i in range(start, min(n, start + PER_OBJECT)))
        docs.append("apiVersion: routeagent.io/v1alpha1\nkind: Advertisement\nmetadata:\n"
                    f"  name: bench-{k}\n  labels: {{type: bench}}\nspec:\n  type: prefix\n  prefixes:\n{items}")
    return "---\n".join(docs)


def write_config(confdir: str, n: int) -> None:
    write_agent_yaml(confdir, AGENT_YAML)
    write_atomic(os.path.join(confdir, "adverts.yaml"), adverts_yaml(n))


def write_atomic(path: str, text: str, replace: bool = True) -> str:
    tmp = path + ".tmp"  # not *.yaml: the agent does not read it
    with open(tmp, "w") as f:
        f.write(text)
    if replace:
        os.replace(tmp, path)
    return tmp


def config_load_seconds(n: int, workdir: str) -> tuple[float, float]:
    """(import of the config loader, best of 3 `load_path` of the agent's config with N prefixes)."""
    t0 = time.perf_counter()
    from agent.config.loader import load_path

    t_import = time.perf_counter() - t0
    confdir = os.path.join(workdir, "config-load")
    write_config(confdir, n)
    best = float("inf")
    for _ in range(3):
        t0 = time.perf_counter()
        config = load_path(confdir)
        best = min(best, time.perf_counter() - t0)
    assert sum(len(a.spec.prefixes) for a in config.adverts) == n
    shutil.rmtree(confdir, ignore_errors=True)
    return t_import, best


# ------------------------------------------------------------------------------------------------
# one run

def agent_change(res: dict, proc, pids: dict, confdir: str, log_path: str, n: int, counter, timeout: float) -> None:
    """One prefix more in the Advertisement file (atomic rename) + SIGHUP; the agent-internal
    split from its log and from the relay's write counter."""
    relay = pids.get("relay") or [0]
    watch = WriteWatch(relay[0], interval=IO_POLL_SECONDS) if relay[0] else None
    tmp = write_atomic(os.path.join(confdir, "adverts.yaml"), adverts_yaml(n + 1), replace=False)
    if watch:
        watch.start()
    t0 = time.time()
    os.replace(tmp, os.path.join(confdir, "adverts.yaml"))
    os.kill(proc.pid, signal.SIGHUP)
    t_end = counter.wait(timeout)
    if watch:
        watch.close()
    res["change_s"] = t_end - t0
    loaded = agent_log_times(log_path, "configuration reloaded", t0)
    if loaded:
        res["change_config_loaded_s"] = loaded[0] - t0
    if watch and watch.t_changed:
        res["change_to_exabgp_s"] = watch.t_changed - t0
    res["reloads"] = len(loaded)
    res["agent_rss_after_change_mib"] = round(rss_mib([proc.pid]), 1)


def run_one(kind: str, n: int, workdir: str, timeout: float, profile: str | None = None,
            quickack: bool = False, launcher: tuple[str, ...] | None = ()) -> dict:
    """One measurement of sender `kind` (agent | bird | exabgp_alone) in fresh namespaces."""
    from contextlib import ExitStack

    from testlab.bird import Bird, ImportCounter

    with ExitStack() as stack:
        lab = Lab(os.path.join(workdir, "lab"), stack, peer_bird_config(), tag="ex", quickack=quickack)
        res: dict = {"kind": kind, "n": n}
        pids: dict[str, list[int]] = {"receiver_bird": [lab.bird.proc.pid]}
        cpu_up: dict[str, float] = {}
        proc = sender = None
        confdir, state = os.path.join(workdir, "config"), os.path.join(workdir, "state")
        log_path = os.path.join(workdir, f"{kind}.log")
        if kind == "agent":
            write_config(confdir, n)
            proc, t_launch = launch_agent(lab.node, ["--config", confdir, "--state-dir", state], log_path,
                                          stack, profile)
            pids["agent"] = [proc.pid]
        elif kind == "exabgp_alone":
            proc, t_launch = launch_exabgp(workdir, lab.node, AGENT_YAML, exabgp_alone_helper(workdir, n),
                                           log_path, stack, launcher=launcher)
            pids["exabgp"] = [proc.pid]
        else:
            t_launch = time.time()
            sender = Bird(lab.node, os.path.join(workdir, "sender"), sender_config(n))
            stack.callback(sender.close)
            pids["sender_bird"] = [sender.proc.pid]

        def on_up() -> None:  # the session is up: CPU of every process so far (start-up excluded)
            if kind == "agent":
                found = agent_pids(proc.pid, state)
                if found["exabgp"]:
                    pids["exabgp"], pids["relay"] = found["exabgp"], found["relay"][:1]
            elif kind == "exabgp_alone":
                pids["helper"] = children(proc.pid)[:1]
            cpu_up.update({k: cpu_s(p) for k, p in pids.items()})
            cpu_up["exabgp_runq"] = sum(proc_runq_wait(p) for p in pids.get("exabgp", []))

        counter = ImportCounter(str(lab.bird.sock), [str(sender.sock)] if sender else [], on_up)
        counter.expect(n)
        counter.start()
        stack.callback(counter.close)
        # ---- (1) the full table
        t_end = counter.wait(timeout)
        res["cpu_s"] = {k: round(cpu_s(p) - cpu_up.get(k, 0.0), 3) for k, p in pids.items()}
        # ExaBGP runnable but waiting for a core (other processes on this machine): not its own cost
        res["exabgp_runq_wait_s"] = round(sum(proc_runq_wait(p) for p in pids.get("exabgp", []))
                                          - cpu_up.get("exabgp_runq", 0.0), 3)
        ups = lab.bird.established_at("n4")
        if not ups:
            raise RuntimeError("the receiver never logged its session as Established")
        res["sessions"] = len(ups)
        res["seconds"] = t_end - ups[0]
        res["launch_s"] = t_end - t_launch
        res["up_seen_lag_s"] = counter.up_seen - ups[0]  # when the CPU snapshot was taken
        rss_of = {"agent": ("agent", "exabgp", "relay"), "exabgp_alone": ("exabgp",), "bird": ("sender_bird",)}
        res.update({f"{k}_rss_mib": round(rss_mib(pids.get(k, [])), 1) for k in rss_of[kind]})
        res["route_count"] = lab.bird.route_count()
        # ---- (2) one change: one prefix more
        if kind in ("agent", "bird") and not profile:
            time.sleep(0.5)  # let the sender go idle (ExaBGP's acks drained, BIRD done)
            c0 = {k: cpu_s(p) for k, p in pids.items()}
            time.sleep(IDLE_SECONDS)  # CPU while idle with N announced
            res["idle_cpu_pct"] = {k: round((cpu_s(p) - c0[k]) / IDLE_SECONDS * 100, 1)
                                   for k, p in pids.items() if k != "receiver_bird"}
            new = prefix_text(n)
            counter.expect(n + 1)
            if kind == "agent":
                agent_change(res, proc, pids, confdir, log_path, n, counter, timeout)
            else:
                t0, t_reply = sender.timed_configure(sender_config(n + 1))
                res["change_s"] = counter.wait(timeout) - t0
                res["change_configure_reply_s"] = t_reply - t0
            out = lab.bird.command(f"show route for {new}")
            if new not in out:
                raise RuntimeError(f"{new} not at the receiver after the change: {out}")
        res.update(counter.close())
    return res


# ------------------------------------------------------------------------------------------------
# report

def describe(r: dict) -> str:
    cpu = ", ".join(f"{k} {v:.2f}s" for k, v in r["cpu_s"].items())
    line = (f"  {r['kind']:<13} {r['n']:>7} {r['seconds']:7.3f}s ({r['n'] / r['seconds']:8.0f}/s; "
            f"launch {r['launch_s']:.2f}s)  cpu from Established: {cpu}; ExaBGP waited for a core "
            f"{r.get('exabgp_runq_wait_s', 0):.2f}s{notes(r)}")
    if "change_s" in r:
        parts = [f"change {r['change_s'] * 1000:.1f} ms"]
        if "change_config_loaded_s" in r:
            parts.append(f"config loaded at {r['change_config_loaded_s'] * 1000:.0f} ms")
        if "change_to_exabgp_s" in r:
            parts.append(f"command at ExaBGP's API helper at {r['change_to_exabgp_s'] * 1000:.1f} ms")
        if "change_configure_reply_s" in r:
            parts.append(f"`configure` answered at {r['change_configure_reply_s'] * 1000:.1f} ms")
        if r.get("reloads", 1) != 1:
            parts.append(f"{r['reloads']} reloads logged")
        if r.get("idle_cpu_pct"):
            parts.append("idle CPU before it: " + ", ".join(f"{k} {v}%" for k, v in r["idle_cpu_pct"].items()))
        line += "\n" + " " * 16 + "; ".join(parts)
    return line


def report(args, best: dict, best_change: dict, runs: list[dict], load_s: float) -> dict:
    """The summary lines and the result object (the last line)."""
    n = args.n
    a, b, e = best.get("agent"), best.get("bird"), best.get("exabgp_alone")
    ca, cb = best_change.get("agent"), best_change.get("bird")
    result: dict = {"bench": "export", "n": n, "repeat": args.repeat, "quickack": args.quickack,
                    "agent_s": round(a["seconds"], 3) if a else None,
                    "ref": "bird static -> bird", "ref_s": round(b["seconds"], 3) if b else None}
    if a and b:
        result["ratio"] = ratio(a["seconds"], b["seconds"])
    result["change_s"] = round(ca["change_s"], 4) if ca else None
    if ca:
        for key in ("change_config_loaded_s", "change_to_exabgp_s"):
            if key in ca:
                result[key] = round(ca[key], 4)
    result["ref_change_s"] = round(cb["change_s"], 4) if cb else None
    if e:
        result["exabgp_alone_s"] = round(e["seconds"], 3)
        if a:
            result["ratio_exabgp_alone"] = ratio(a["seconds"], e["seconds"])
    result["config_load_s"] = round(load_s, 3)
    for kind in ("agent", "bird", "exabgp_alone"):  # best is the min; the median shows the spread
        times = [r["seconds"] for r in runs if r["kind"] == kind]
        if times:
            result[f"{kind}_median_s"] = round(min_median(times)[1], 3)
    agents = [r for r in runs if r["kind"] == "agent"]
    if agents:
        result.update(worst(agents, "agent_rss_mib", "exabgp_rss_mib"))
        idle = [r["idle_cpu_pct"] for r in agents if r.get("idle_cpu_pct")]
        if idle:
            result["agent_idle_cpu_pct"] = max(i.get("agent", 0.0) for i in idle)
            result["exabgp_idle_cpu_pct"] = max(i.get("exabgp", 0.0) for i in idle)
    line = ", ".join(f"{name} {r['seconds']:.3f}s ({n / r['seconds']:.0f}/s)"
                     for name, r in (("agent", a), ("BIRD->BIRD", b), ("ExaBGP alone", e)) if r)
    if "ratio" in result:
        line += f"; agent/BIRD {result['ratio']}"
    if "ratio_exabgp_alone" in result:
        line += f"; agent/ExaBGP alone {result['ratio_exabgp_alone']}"
    print(f"{n} adverts: {line}")
    print_change_and_rss([("agent (SIGHUP)", ca), ("BIRD (configure)", cb)],
                         dict(result, **worst(agents, "relay_rss_mib")) if agents else None, f"{n}")
    return result


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=int, default=10000, help="prefixes to advertise")
    common_options(ap, runs_of="each sender", only="agent,bird,exabgp_alone", only_help="senders to run (comma list)",
                   profile_help="also run the agent once under cProfile (not timed)")
    ap.add_argument("--quickack", action="store_true",
                    help="set `quickack 1` on the link routes of both namespaces (no delayed ACKs)")
    ap.add_argument("--launcher-options", default="", help="more launcher options for ExaBGP alone")
    ap.add_argument("--stock", action="store_true", help="ExaBGP alone unpatched (python -m exabgp)")
    ap.add_argument("--exabgp-helper", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.exabgp_helper:
        return exabgp_helper(args.exabgp_helper)
    if not setup("export"):
        return 2
    n = args.n
    kinds = [k for k in ("agent", "bird", "exabgp_alone") if k in args.only.split(",")]
    best: dict[str, dict] = {}
    best_change: dict[str, dict] = {}
    runs: list[dict] = []
    ok = True
    with work_directory("export-bench-", args.keep) as workdir:
        t_import, load_s = config_load_seconds(n, workdir)
        print(f"export: {n} prefixes to one BIRD peer over eBGP; time from Established (receiver's log) "
              f"to all N at the receiver; best of {args.repeat}")
        print(f"  config load: {load_s:.3f}s for {n} prefixes (load_path, best of 3; + {t_import:.2f}s "
              f"importing the loader once)")
        for _, kind, d in rounds(workdir, args.repeat, [(k, k) for k in kinds], args.keep):
            r = run_one(kind, n, d, args.timeout, quickack=args.quickack,
                        launcher=None if args.stock else tuple(args.launcher_options.split()))
            runs.append(r)
            print(describe(r), flush=True)
            ok &= keep_best(best, best_change, kind, r, n)
        if args.profile:
            path = profile_path(args.profile, "agent-export.prof")
            r = run_one("agent", n, os.path.join(workdir, "profile"), args.timeout, profile=path,
                        quickack=args.quickack)
            print(f"cProfile of the agent, {n} adverts (not timed; {r['seconds']:.2f}s under the profiler): {path}")
            print_profile(path)
    return finish(report(args, best, best_change, runs, load_s), ok)


if __name__ == "__main__":
    sys.exit(main())
