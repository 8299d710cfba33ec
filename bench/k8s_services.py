#!/usr/bin/env python3
"""Benchmark: N LoadBalancer Services (with endpoints) on the test API server -> VIPs at a BIRD peer.

Cluster mode end to end. A BIRD 2 receiver in namespace `peer` (10.0.0.1, AS 65001, passive,
`import all`, `export none`, no kernel protocol) and the test API server
(`agent.k8s.testapi.KubeApiServer`, in this process, its listening socket opened inside `peer` with
pyroute2's pushns, on 10.0.0.1:PORT), one veth pair to namespace `node` (10.0.0.254) where the
agent runs as `route-agent run --kubernetes --kubeconfig FILE --node-name node-a --state-dir DIR`
(its real ExaBGP child). The agent reaches the API server over the same veth as its BGP session.

Objects, all in the server before the agent starts:
  * AgentConfig `default` (fib.staleSeconds 5), BgpPeer `peer` (10.0.0.1, AS 65001, local AS
    65000, localAddress/routerId 10.0.0.254, acceptAll both ways, gracefulRestartSeconds 0),
    Advertisement `services` ({type: service, services: {clusterIP: false}}); no podCIDR
    Advertisement, so exactly N routes are advertised (the VIPs);
  * Node `node-a` (InternalIP 10.0.0.254, podCIDRs [10.244.1.0/24]);
  * N Services `svc-I` of type LoadBalancer, clusterIP 10.96.0.0/12 + I + 16, one LB ingress IP
    100.64.0.0 + I + 1, externalTrafficPolicy Local, and for each an EndpointSlice `svc-I-1` with one
    ready endpoint on node-a: the agent must join Services and EndpointSlices to advertise a VIP.

Measured (best of --repeat, fresh namespaces, server and receiver each time):
  (a) agent_s: from launching the agent process until the receiver has N routes imported over the
      session (`show protocols all n4`, "Routes: N imported", polled every 2 ms on a kept-open
      control connection; testlab/bird.py's `ImportCounter`). A breakdown from the agent's log (ms stamps) and
      the receiver's trace: "kubernetes: configuration of node" (initial LIST of the config + Node
      done, config built), "kubernetes: initial list of every resource done", session Established
      (receiver log), "ready: initial re-sync done" (the FIB sync gate: the receiver sends no
      End-of-RIB without graceful restart, so it opens on fib.staleSeconds, usually after the end
      point, and is then not shown), and the N-th route at the receiver;
  (b) RSS of the agent, its ExaBGP child and ExaBGP's relay helper at that point; CPU seconds of
      each, and of this process (the API server's threads + the poller) from launch to the end;
  (c) change_s: one new Service + its EndpointSlice put into the server (Service first) until the
      receiver has N+1 routes; best (and median) of --changes changes, each a new Service;
  (d) the reference in the same run, BIRD -> BIRD: a sending BIRD in `node` with the same N /32 as
      static blackhole routes and `export all`: ref_s from launching it until the receiver has N
      (this includes BIRD's 1 s `connect delay time`; the times from Established are printed
      too), and ref_change_s: one static route more via `configure`;
  (e) list_s: the API server's LIST of the N Services and of the N EndpointSlices through the
      `kubernetes` client as the agent's reflectors do it (`_preload_content=False` + json.loads),
      from this process inside `peer`, before the agent starts: cold (the server serializes every
      item) and warm (the server's per-item cache; this is what the agent's LIST then gets).

The lab (namespaces, the receiving BIRD, BIRD configs, launching the agent, the run loop) is
testlab/benchlab.py, the receiver's route counter testlab/bird.py, /proc figures
testlab/procstat.py; this file keeps what it measures: the objects, the API server's LIST, the
changes and the report.

ratio = agent_s / ref_s (both from launch). Output: human-readable lines, then as the last line one
JSON object. --profile DIR adds one cProfile'd agent run (not timed) and prints its top functions.

    sudo .venv/bin/python bench/k8s_services.py [--n 10000] [--repeat 1]
"""

from __future__ import annotations

import argparse
import ipaddress
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # the repository

from testlab.benchlab import (  # noqa: E402
    HOLD_TIME, NODE_ADDR, NODE_AS, PEER_ADDR, PEER_AS, agent_log_times, agent_pids, common_options, finish,
    keep_best, Lab, launch_agent, min_median, node_bird_config, notes, peer_bird_config, print_change_and_rss,
    print_profile, profile_path, ratio, rounds, setup, work_directory, worst,
)
from testlab.procstat import cpu_s, rss_mib, usage  # noqa: E402

RA = "routeagent.io/v1alpha1"
NODE_NAME = "node-a"
POD_CIDR = "10.244.1.0/24"
VIP_BASE = int(ipaddress.IPv4Address("100.64.0.0")) + 1
CHANGE_BASE = int(ipaddress.IPv4Address("100.127.0.0")) + 1
CLUSTER_BASE = int(ipaddress.IPv4Address("10.96.0.0")) + 16
CHANGE_PAUSE = 0.3  # between two changes: the agent and ExaBGP idle again


def vip(i: int) -> str:
    return str(ipaddress.IPv4Address(VIP_BASE + i))


def cr(kind: str, name: str, spec: dict) -> dict:
    return {"apiVersion": RA, "kind": kind, "metadata": {"name": name, "labels": {}}, "spec": spec}


def config_objects() -> list[dict]:
    from testlab.k8sapi import node

    return [
        cr("AgentConfig", "default", {"fib": {"staleSeconds": 5}}),
        cr("BgpPeer", "peer", {"peerAddress": PEER_ADDR, "peerAS": PEER_AS, "localAS": NODE_AS,
                               "localAddress": NODE_ADDR, "routerId": NODE_ADDR, "holdTime": HOLD_TIME,
                               "importPolicy": "acceptAll", "exportPolicy": "acceptAll",
                               "gracefulRestartSeconds": 0}),
        cr("Advertisement", "services", {"type": "service", "services": {"clusterIP": False}}),
        node(NODE_NAME, [POD_CIDR], [NODE_ADDR]),
    ]


def service_pair(name: str, lb_ip: str, cluster_ip: str, endpoint: str) -> tuple[dict, dict]:
    from testlab.k8sapi import endpoint_slice, service

    return (service(name, cluster_ips=[cluster_ip], type="LoadBalancer", lb_ips=[lb_ip],
                    external_traffic_policy="Local"),
            endpoint_slice(f"{name}-1", name, addresses=[endpoint], node_name=NODE_NAME))


def service_objects(n: int) -> list[dict]:
    out = []
    for i in range(n):
        s, e = service_pair(f"svc-{i}", vip(i), str(ipaddress.IPv4Address(CLUSTER_BASE + i)),
                            f"10.244.1.{i % 250 + 2}")
        out += (s, e)
    return out


def sender_bird_config(n: int, changes: int = 0) -> str:
    """The reference sender: the same N VIPs as /32 static blackholes, exported to the receiver;
    with `changes`, that many more static protocols of one route each (one per change)."""
    return node_bird_config([f"{vip(i)}/32 blackhole" for i in range(n)]) + "".join(
        f"protocol static c{j} {{ ipv4; route {ipaddress.IPv4Address(CHANGE_BASE + j)}/32 blackhole; }}\n"
        for j in range(changes))


def start_server(ns: str, objects: list[dict], stack):
    """The test API server listening on PEER_ADDR inside `ns`, loaded with `objects`."""
    from testlab.k8sapi import KubeApiServer
    from testlab.netns import in_netns

    api = KubeApiServer(host=PEER_ADDR)
    with in_netns(ns):
        api.start()
    stack.callback(api.stop)
    t0 = time.perf_counter()
    for obj in objects:
        api.put(obj)
    return api, time.perf_counter() - t0


def list_seconds(api, ns: str) -> dict:
    """LIST of all Services and all EndpointSlices as the agent's reflectors do it (raw response +
    json.loads), from this process inside `ns`: cold (first) and warm (second) per resource."""
    from kubernetes import client as kclient

    out: dict = {}
    from testlab.netns import in_netns

    with in_netns(ns):  # the client's connections are opened from this thread, inside `ns`
        c = api.api_client()
        try:
            calls = {"services": kclient.CoreV1Api(c).list_service_for_all_namespaces,
                     "endpointslices": kclient.DiscoveryV1Api(c).list_endpoint_slice_for_all_namespaces}
            for name, fn in calls.items():
                for run in ("cold", "warm"):
                    t0 = time.perf_counter()
                    resp = fn(_preload_content=False)
                    t1 = time.perf_counter()
                    body = json.loads(resp.data)
                    t2 = time.perf_counter()
                    resp.release_conn()
                    out[f"{name}_{run}_s"] = round(t2 - t0, 3)
                    out[f"{name}_{run}_http_s"] = round(t1 - t0, 3)
                    out[f"{name}_items"] = len(body.get("items") or ())
                    out[f"{name}_mib"] = round(len(resp.data) / 2**20, 2)
        finally:
            c.close()
    return out


# ------------------------------------------------------------------------------------------------
# one run

def agent_marks(log_path: str, t_launch: float) -> dict:
    """The agent's steps from its log, in seconds from launch."""
    marks = {}
    for key, text in (("config_built_s", "kubernetes: configuration of node"),
                      ("k8s_synced_s", "kubernetes: initial list of every resource done"),
                      ("ready_s", "ready: initial re-sync done")):
        times = agent_log_times(log_path, text, t_launch)
        if times:
            marks[key] = round(times[0] - t_launch, 3)
    return marks


def one_change(kind: str, k: int, n: int, api, sender, counter, timeout: float) -> tuple[float, str]:
    """Change `k`: a new Service + its EndpointSlice (Service first) into the server, or one static
    route more at the sending BIRD; its time until the receiver has N+k+1, and the new prefix."""
    counter.expect(n + k + 1)
    new = f"{ipaddress.IPv4Address(CHANGE_BASE + k)}/32"
    if kind == "agent":
        s, e = service_pair(f"chg-{k}", new[:-3], str(ipaddress.IPv4Address(CLUSTER_BASE + n + k)),
                            f"10.244.1.{k % 250 + 2}")
        t0 = time.time()
        api.put(s)
        api.put(e)
    else:
        t0, _ = sender.timed_configure(sender_bird_config(n, k + 1))
    return counter.wait(timeout) - t0, new


def run_one(kind: str, n: int, workdir: str, timeout: float, changes: int = 3,
            profile: str | None = None, measure_list: bool = False) -> dict:
    """One measurement of `kind` (agent | bird) in fresh namespaces."""
    from contextlib import ExitStack

    from testlab.bird import Bird, ImportCounter

    with ExitStack() as stack:
        lab = Lab(os.path.join(workdir, "lab"), stack, peer_bird_config(), tag="ks")
        res: dict = {"kind": kind, "n": n}
        proc = sender = api = None
        log_path = os.path.join(workdir, f"{kind}.log")
        if kind == "agent":
            api, res["put_s"] = start_server(lab.peer, config_objects() + service_objects(n), stack)
            if measure_list:
                res["list"] = list_seconds(api, lab.peer)
            kubeconfig = api.kubeconfig(os.path.join(workdir, "kubeconfig"))
            me0 = os.times()
            proc, t_launch = launch_agent(lab.node, ["--kubernetes", "--kubeconfig", kubeconfig, "--node-name",
                                                     NODE_NAME, "--state-dir", os.path.join(workdir, "state")],
                                          log_path, stack, profile)
        else:
            me0 = os.times()
            t_launch = time.time()
            sender = Bird(lab.node, os.path.join(workdir, "sender"), sender_bird_config(n))
            stack.callback(sender.close)

        counter = ImportCounter(str(lab.bird.sock), [str(sender.sock)] if sender else [])
        counter.expect(n)
        counter.start()
        stack.callback(counter.close)
        # ---- (a) the whole table
        try:
            t_end = counter.wait(timeout)
        except TimeoutError:
            if kind == "agent":
                with open(log_path, errors="replace") as f:
                    print("agent log (tail):\n" + f.read()[-3000:], file=sys.stderr)
            raise
        me1 = os.times()
        res["seconds"] = t_end - t_launch
        ups = lab.bird.established_at("n4")
        if not ups:
            raise RuntimeError("the receiver never logged its session as Established")
        res["sessions"] = len(ups)
        res["established_s"] = ups[0] - t_launch
        res["from_established_s"] = t_end - ups[0]
        res["bench_process_cpu_s"] = round((me1.user + me1.system) - (me0.user + me0.system), 2)
        figures = usage(agent_pids(proc.pid, os.path.join(workdir, "state")) if kind == "agent"
                        else {"sender_bird": [sender.proc.pid]})
        res.update({k: v for k, v in figures.items() if k.endswith("_rss_mib")})
        res["cpu_s"] = {k[:-6]: v for k, v in figures.items() if k.endswith("_cpu_s")}
        if kind == "agent":
            res["marks"] = agent_marks(log_path, t_launch)
        res["cpu_s"]["receiver_bird"] = round(cpu_s([lab.bird.proc.pid]), 2)
        res["route_count"] = lab.bird.route_count()
        # ---- (c) changes: one new Service (+ slice) each / one more static route
        if changes > 0:
            time.sleep(1.0)  # let everything go idle (status writes, ExaBGP's acks)
            res["changes_s"] = []
            for k in range(changes):
                seconds, new = one_change(kind, k, n, api, sender, counter, timeout)
                res["changes_s"].append(seconds)
                out = lab.bird.command(f"show route for {new}")
                if new.split("/")[0] not in out or "Network not found" in out:
                    raise RuntimeError(f"{new} not at the receiver after the change: {out}")
                time.sleep(CHANGE_PAUSE)
            res["change_s"], res["change_median_s"] = min_median(res["changes_s"])
            if kind == "agent":
                res["agent_rss_after_changes_mib"] = round(rss_mib([proc.pid]), 1)
        res.update(counter.close())
    return res


def describe(r: dict) -> str:
    cpu = ", ".join(f"{k} {v:.2f}s" for k, v in r["cpu_s"].items())
    line = (f"  {r['kind']:<6} {r['n']:>7} VIPs: {r['seconds']:7.3f}s from launch "
            f"(Established at {r['established_s']:.3f}s, then {r['from_established_s']:.3f}s)  "
            f"cpu: {cpu}, this process {r['bench_process_cpu_s']:.2f}s{notes(r)}")
    if r.get("marks"):
        m = r["marks"]
        steps = [("config built", m.get("config_built_s")), ("all listed", m.get("k8s_synced_s")),
                 ("Established", round(r["established_s"], 3)), ("ready", m.get("ready_s")),
                 ("N at BIRD", round(r["seconds"], 3))]
        steps = sorted((t, name) for name, t in steps if t is not None)
        line += "\n         agent timeline from launch: " + ", ".join(f"{name} {t:.3f}s" for t, name in steps)
    if "agent_rss_mib" in r:
        line += (f"\n         RSS: agent {r['agent_rss_mib']} MiB, ExaBGP {r['exabgp_rss_mib']} MiB, "
                 f"relay {r['relay_rss_mib']} MiB")
    if "changes_s" in r:
        line += ("\n         one change: " + ", ".join(f"{c * 1000:.1f}" for c in r["changes_s"])
                 + f" ms (best {r['change_s'] * 1000:.1f} ms)")
    return line


def describe_list(r: dict) -> str:
    listing, n = r["list"], r["n"]
    return (f"  test API server: {2 * n + 4} objects put in {r['put_s']:.2f}s; LIST through the "
            f"kubernetes client (raw + json.loads), cold/warm: Services "
            f"{listing['services_cold_s']:.3f}/{listing['services_warm_s']:.3f}s "
            f"({listing['services_mib']} MiB), EndpointSlices {listing['endpointslices_cold_s']:.3f}/"
            f"{listing['endpointslices_warm_s']:.3f}s ({listing['endpointslices_mib']} MiB)")


def report(args, best: dict, best_change: dict, runs: list[dict], listing: dict) -> dict:
    """The summary lines and the result object (the last line)."""
    n = args.n
    a, b = best.get("agent"), best.get("bird")
    ca, cb = best_change.get("agent"), best_change.get("bird")
    result: dict = {"bench": "k8s_services", "n": n, "routes": "N VIPs (no pod CIDR)", "repeat": args.repeat,
                    "agent_s": round(a["seconds"], 3) if a else None,
                    "ref": "bird static -> bird (from launch)", "ref_s": round(b["seconds"], 3) if b else None}
    if a and b:
        result["ratio"] = ratio(a["seconds"], b["seconds"])
    if a:
        result["agent_from_established_s"] = round(a["from_established_s"], 3)
        result.update(a.get("marks", {}))
        result["established_s"] = round(a["established_s"], 3)
    if b:
        result["ref_from_established_s"] = round(b["from_established_s"], 3)
    result["change_s"] = round(ca["change_s"], 4) if ca else None
    result["ref_change_s"] = round(cb["change_s"], 4) if cb else None
    agents = [r for r in runs if r["kind"] == "agent"]
    if agents:
        result.update(worst(agents, "agent_rss_mib", "exabgp_rss_mib", "relay_rss_mib"))
        result["agent_cpu_s"] = a["cpu_s"]["agent"]
        result["exabgp_cpu_s"] = a["cpu_s"]["exabgp"]
        after = [r for r in agents if "agent_rss_after_changes_mib" in r]
        if after:
            result.update(worst(after, "agent_rss_after_changes_mib"))
    if listing:
        result["list_services_s"] = listing["services_warm_s"]
        result["list_endpointslices_s"] = listing["endpointslices_warm_s"]
        result["list_cold_s"] = round(listing["services_cold_s"] + listing["endpointslices_cold_s"], 3)
    line = ", ".join(f"{name} {r['seconds']:.3f}s" for name, r in (("agent", a), ("BIRD->BIRD", b)) if r)
    if "ratio" in result:
        line += f"; agent/BIRD {result['ratio']}"
    print(f"{n} Services: {line}")
    print_change_and_rss([("agent (new Service+slice)", ca), ("BIRD (configure)", cb)],
                         result if agents else None, f"{n} Services")
    return result


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=int, default=10000, help="LoadBalancer Services (each with an EndpointSlice)")
    ap.add_argument("--changes", type=int, default=5, help="single-Service changes per run; the best counts")
    ap.add_argument("--no-list", action="store_true", help="skip the LIST timing of the API server")
    common_options(ap, runs_of="agent and reference", only="agent,bird", only_help="runs to do (comma list)",
                   profile_help="also run the agent once under cProfile (not timed)")
    args = ap.parse_args()
    if not setup("k8s_services"):
        return 2
    n = args.n
    kinds = [k for k in ("agent", "bird") if k in args.only.split(",")]
    best: dict[str, dict] = {}
    best_change: dict[str, dict] = {}
    runs: list[dict] = []
    listing: dict = {}
    ok = True
    with work_directory("k8s-services-bench-", args.keep) as workdir:
        print(f"k8s_services: {n} LoadBalancer Services (externalTrafficPolicy Local, one ready local "
              f"endpoint each) -> VIPs at a BIRD peer; time from launch to N at the receiver; best of {args.repeat}")
        for rep, kind, d in rounds(workdir, args.repeat, [(k, k) for k in kinds], args.keep):
            r = run_one(kind, n, d, args.timeout, args.changes,
                        measure_list=(kind == "agent" and rep == 0 and not args.no_list))
            runs.append(r)
            if r.get("list"):
                listing = r["list"]
                print(describe_list(r))
            print(describe(r), flush=True)
            ok &= keep_best(best, best_change, kind, r, n)
        if args.profile:
            path = profile_path(args.profile, "agent-k8s-services.prof")
            k = max(args.changes, 20)
            r = run_one("agent", n, os.path.join(workdir, "profile"), args.timeout, k, profile=path)
            print(f"cProfile of the agent's main thread (reflector threads are not profiled), {n} Services "
                  f"then {k} single-Service changes (not timed; {r['seconds']:.2f}s to N under the profiler, "
                  f"changes {r['change_median_s'] * 1000:.0f} ms median): {path}")
            print_profile(path)
            print_profile(path, sort="cumulative", restrict=r"/agent/")  # where the main thread's time goes
    return finish(report(args, best, best_change, runs, listing), ok)


if __name__ == "__main__":
    sys.exit(main())
