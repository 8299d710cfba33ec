"""The `route-agent` command: run the agent, validate configs, and query a running agent.

DOC: `run` starts the agent in the foreground; `validate` checks configuration files offline with
exactly the checks a running agent applies; `show` and `explain` ask the running agent's local HTTP
API (ROUTE_AGENT_API or --api, default http://127.0.0.1:9180) and print text or `--json`;
`show rib` reads the RIB in pages of RIB_PAGE rows (following the API's `next` cursor).
Every command that prints stops quietly (exit status 141, as after SIGPIPE) when its reader goes
away (``route-agent show rib | head``), without a traceback.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import urllib.error
import urllib.parse
import urllib.request

DEFAULT_API = "http://127.0.0.1:9180"
RIB_PAGE = 1000  # rows per /api/rib request


def _get(api: str, path: str):
    try:
        with urllib.request.urlopen(api.rstrip("/") + path, timeout=10) as resp:
            return json.load(resp)
    except urllib.error.HTTPError as exc:
        body = exc.read().decode(errors="replace")
        raise SystemExit(f"route-agent: {path}: HTTP {exc.code}: {body}") from None
    except OSError as exc:
        raise SystemExit(f"route-agent: cannot reach the agent at {api}: {exc}") from None


def cmd_run(args) -> int:
    from .config.loader import ConfigError, format_problems
    from .daemon.agent import Agent

    try:
        if args.config is None and not args.kubernetes:
            print("route-agent run: give --config PATH (standalone) or --kubernetes (cluster mode)",
                  file=sys.stderr)
            return 2
        agent = Agent(args.config, flush_on_exit=args.flush_on_exit, api_port=args.api_port,
                      api_address=args.api_address, metrics_port=args.metrics_port,
                      metrics_address=args.metrics_address, state_dir=args.state_dir,
                      kubernetes=args.kubernetes, kubeconfig=args.kubeconfig, node_name=args.node_name)
    except ConfigError as exc:
        print(format_problems(exc.problems), file=sys.stderr)
        return 1
    try:
        asyncio.run(agent.run())
    except ConfigError as exc:  # cluster mode: the API client could not be set up
        print(format_problems(exc.problems), file=sys.stderr)
        return 1
    return 0


def cmd_validate(args) -> int:
    from .config.loader import validate_main

    return validate_main(args.path)


def _bgp_text(c) -> str:
    b = c.get("bgp")
    if not b:
        return ""
    parts = [f"as-path {' '.join(map(str, b['asPath'])) or '(empty)'}", f"local-pref {b['localPref']}",
             f"med {b['med']}", f"origin {b['origin']}"]
    if b["communities"]:
        parts.append("communities " + " ".join(b["communities"]))
    if b["largeCommunities"]:
        parts.append("large " + " ".join(b["largeCommunities"]))
    return "  {" + ", ".join(parts) + "}"


def _print_rib(rows) -> None:
    for row in rows:
        mark = "*" if row["installed"] else " "
        print(f"{mark} {row['prefix']}  ({row['reason']}){'  ' + row['note'] if row['note'] else ''}")
        for c in row["candidates"]:
            detail = f"  [{c['detail']}]" if c["detail"] else ""
            print(f"    {c['status']:<13} {c['origin']:<32} distance {c['distance']:<3} {c['route']}"
                  f"{_bgp_text(c)}{detail}")


def _bfd_text(b) -> str:
    if not b:
        return ""
    text = f"bfd {b['state']} ({b['minRx']}/{b['minTx']} ms x{b['multiplier']}"
    if b["detectionMs"] is not None:
        text += f", detection {b['detectionMs']:.0f} ms"
    text += ")"
    if b["state"] != "up":
        text += f", {b['routesHeld']} routes held until bfd is up"
    if b["error"]:
        text += f", {b['error']}"
    return text


def _print_peers(rows) -> None:
    print(f"{'peer':<26} {'AS':>10} {'type':<5} {'state':<10} {'for':>8}  family        recv  accept  reject  inst  max-prefix")
    for p in rows:
        since = f"{p['for_seconds']:.0f}s" if p["for_seconds"] is not None else "-"
        head = f"{p['name'] + ' ' + p['address']:<26} {p['peerAS']:>10} {p['type']:<5} {p['state']:<10} {since:>8}"
        for i, (fam, f) in enumerate(p["families"].items()):
            mp = f["maxPrefix"]
            mps = f"{mp['count']}/{mp['limit']} {mp['state']}" if mp else "-"
            plus = "+" if f.get("rejectedNotKept") else ""  # beyond the stored rejections: at least
            print(f"{head if i == 0 else '':<64}  {fam:<12} {str(f['received']) + plus:>6} {f['accepted']:>7} "
                  f"{str(f['rejected']) + plus:>7} {f['installed']:>5}  {mps}")
        extra = [x for x in (p["reason"] and f"last: {p['reason']}", p["stale"] and f"{p['stale']} stale routes",
                             p["held_down"] and "held down (max-prefix)", _bfd_text(p.get("bfd"))) if x]
        if extra:
            print(f"{'':<28}{'; '.join(extra)}")


def _print_adverts(rows) -> None:
    for row in rows:
        print(row["prefix"])
        for peer, a in row["peers"].items():
            attrs = [f"next-hop {a['nextHop']}"]
            attrs += [f"{k} {a[v]}" for k, v in (("local-pref", "localPref"), ("med", "med")) if a[v] is not None]
            if a["prepend"]:
                attrs.append(f"prepend {a['prepend']}")
            if a["communities"]:
                attrs.append("communities " + " ".join(a["communities"]))
            if a["largeCommunities"]:
                attrs.append("large " + " ".join(a["largeCommunities"]))
            state = "announced" if a["announced"] else "pending (session not up)"
            print(f"    to {peer:<24} {', '.join(attrs)}  [from {', '.join(a['sources'])}; {a['policy']}; {state}]")


def _print_fib(data) -> None:
    print(f"# table {data['table']} protocol {data['protocol']}"
          f"{'' if data['gate_open'] else ' (sync gate closed: adopted routes held)'}")
    for r in data["routes"]:
        print(f"{r['prefix']} {r['route']}{'  (stale)' if r['stale'] else ''}")
    for r in data["pending"]:
        print(f"pending: {r['prefix']} {r['route']}")
    for r in data["failed"]:
        print(f"failed: {r['prefix']} {r['op']}: {r['error']}")


def _rib_pages(api: str):
    """The RIB page by page, following the `next` cursor of /api/rib."""
    after = None
    while True:
        query = {"limit": RIB_PAGE} | ({"after": after} if after else {})
        page = _get(api, "/api/rib?" + urllib.parse.urlencode(query))
        yield page["routes"]
        after = page["next"]
        if after is None:
            return


def cmd_show(args) -> int:
    if args.what == "rib":
        if args.json:
            print(json.dumps([row for rows in _rib_pages(args.api) for row in rows], indent=2))
        else:
            for rows in _rib_pages(args.api):  # print each page as it comes
                _print_rib(rows)
        return 0
    query = f"?{urllib.parse.urlencode({'peer': args.peer})}" if args.peer and args.what == "adverts" else ""
    data = _get(args.api, f"/api/{args.what}{query}")
    if args.json:
        print(json.dumps(data, indent=2))
    elif args.what == "peers":
        _print_peers(data)
    elif args.what == "adverts":
        _print_adverts(data)
    else:
        _print_fib(data)
    return 0


def cmd_explain(args) -> int:
    data = _get(args.api, "/api/explain?" + urllib.parse.urlencode({"prefix": args.prefix}))
    if args.json:
        print(json.dumps(data, indent=2))
        return 0
    if "query" in data:  # an address: its longest match, as `ip route get` would pick it
        print(f"{data['query']}: longest match {data['prefix'] or '- (no route covers it)'}")
        for m in data["more_specific"]:
            print(f"  more specific, not in the kernel: {m['prefix']}: {m['why']}")
        if data["prefix"] is None:
            return 0
    print(f"{data['prefix']}:")
    if not data["candidates"]:
        print("  no candidate from any source")
    for c in data["candidates"]:
        detail = f" ({c['detail']})" if c["detail"] else ""
        print(f"  {c['status']:<13} {c['origin']} distance {c['distance']}: {c['route']}{_bgp_text(c)}{detail}")
    for b in data.get("bgp", []):
        verdict = "accepted" if b["accepted"] else "rejected"
        print(f"  from peer {b['peer']}: {verdict} by {b['policy'] or '-'} {b['statement']} ({b['description']})")
    for e in data.get("export", []):
        if e["advertised"]:
            state = "announced" if e["announced"] else "pending"
            print(f"  advertised to {e['peer']} ({state}; from {', '.join(e['sources'])}; {e['policy']})")
        else:
            print(f"  not advertised to {e['peer']}: {e['reason']} ({e['policy'] or '-'} {e['statement']})")
    print(f"  decided by: {data['reason']}")
    if data["note"]:
        print(f"  {data['note']}")
    print(f"  wanted in kernel: {data['desired'] or '-'}")
    print(f"  kernel: {data['kernel'] or '-'}  [{data['fib_state']}]")
    return 0


def cmd_crds(args) -> int:
    from .config.crds import run

    return run(args.out, check=args.check)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="route-agent", description=__doc__.split("\n")[0])
    p.add_argument("--version", action="version", version=_version())
    p.add_argument("--log-level", default=os.environ.get("ROUTE_AGENT_LOG", "info"))
    p.add_argument("--log-format", choices=["text", "json"], default=os.environ.get("ROUTE_AGENT_LOG_FORMAT", "text"),
                   help="text (default) or json: one object per line (time, level, logger, message, peer)")
    sub = p.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run", help="run the agent")
    r.add_argument("--config", help="YAML file or directory of YAML files (standalone mode)")
    r.add_argument("--kubernetes", action="store_true",
                   help="cluster mode: configuration from the routeagent.io CRDs, pod CIDRs and "
                   "Service VIPs from the API server")
    r.add_argument("--kubeconfig", help="kubeconfig file (default: in-cluster, $KUBECONFIG, ~/.kube/config)")
    r.add_argument("--node-name", help="this node's name (default $NODE_NAME, else the host name)")
    r.add_argument("--flush-on-exit", action="store_true", help="delete our routes on SIGTERM")
    r.add_argument("--api-port", type=int, help="override spec.api.port")
    r.add_argument("--api-address", help="override spec.api.address")
    r.add_argument("--metrics-address", help="override spec.api.metricsAddress: also serve /metrics, "
                   "/healthz and /readyz (nothing else) on this address")
    r.add_argument("--metrics-port", type=int, help="override spec.api.metricsPort (default 9181)")
    r.add_argument("--state-dir", help="runtime files (ExaBGP config, sockets); one per agent "
                   "(default $ROUTE_AGENT_STATE_DIR or /run/route-agent)")
    r.set_defaults(fn=cmd_run)
    v = sub.add_parser("validate", help="check configuration files and print every error")
    v.add_argument("path")
    v.set_defaults(fn=cmd_validate)
    c = sub.add_parser("crds", help="print or write the CustomResourceDefinitions generated from the models")
    c.add_argument("--out", metavar="DIR", help="write one file per kind into DIR (deploy/crds); "
                   "default: print one multi-document YAML stream (for kubectl apply -f -)")
    c.add_argument("--check", action="store_true",
                   help="with --out: exit 1 when the files in DIR differ from the models")
    c.set_defaults(fn=cmd_crds)
    api = os.environ.get("ROUTE_AGENT_API", DEFAULT_API)
    s = sub.add_parser("show", help="show the RIB or the FIB of a running agent")
    s.add_argument("what", choices=["rib", "fib", "peers", "adverts"])
    s.add_argument("--peer", help="adverts: only this peer (address or BgpPeer name)")
    s.add_argument("--json", action="store_true")
    s.add_argument("--api", default=api)
    s.set_defaults(fn=cmd_show)
    e = sub.add_parser("explain", help="why a prefix is (not) installed; for an address, its "
                       "longest match (as `ip route get` picks it)")
    e.add_argument("prefix", help="a prefix (explained exactly, also /32) or an address")
    e.add_argument("--json", action="store_true")
    e.add_argument("--api", default=api)
    e.set_defaults(fn=cmd_explain)
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    from .daemon.logformat import setup

    setup(args.log_level, args.log_format)
    try:
        code = args.fn(args)
        sys.stdout.flush()  # inside the try: a reader gone is found here, not at exit
    except BrokenPipeError:
        return _reader_gone()
    return code


def _reader_gone() -> int:
    """stdout's reader went away (``route-agent explain ... | head``): stop quietly, as a tool
    killed by SIGPIPE would, instead of printing a traceback. stdout is pointed at /dev/null so
    that the interpreter's final flush of what is still buffered fails no more."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)
    return 128 + 13  # what a shell reports for a command killed by SIGPIPE


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    def of(dist: str) -> str:
        try:
            return version(dist)
        except PackageNotFoundError:
            return "not installed"

    return f"route-agent {of('route-agent')} (exabgp {of('exabgp')}, pyroute2 {of('pyroute2')})"


if __name__ == "__main__":
    sys.exit(main())
