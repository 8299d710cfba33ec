"""The `route-agent` command: run the agent, validate configs, and query a running agent.

DOC: `run` starts the agent in the foreground; `validate` checks configuration files offline with
exactly the checks a running agent applies; `show` and `explain` ask the running agent's local HTTP
API (ROUTE_AGENT_API or --api, default http://127.0.0.1:9180) and print aligned tables (built by
`agent.clitable` from the decoded JSON) or, with `--json` (before or after the view: `show --json
peers`, `show peers --json`), the API's JSON unchanged. `show rib` reads the RIB in pages of
RIB_PAGE rows (following the API's `next` cursor) and prints each page as it arrives, text and
JSON alike, so a RIB of any size streams in constant memory.

Exit statuses: 0 success; 1 the agent could not be reached, answered an error or not JSON (and
`run`/`validate`/`crds --check` found an invalid configuration or stale files); 2 a usage error;
130 `show`/`explain` interrupted (Ctrl-C); 141 the reader of the output went away
(``route-agent show rib | head``): every command that prints then stops quietly, as after
SIGPIPE, without a traceback. docs/cli.md describes every command and table.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import textwrap
import urllib.error
import urllib.parse
import urllib.request

from . import clitable

DEFAULT_API = "http://127.0.0.1:9180"
RIB_PAGE = 1000  # rows per /api/rib request
TIMEOUT = 10  # seconds per API request
SHOW_VIEWS = ("rib", "fib", "peers", "adverts")


def _get(api: str, path: str):
    """GET `path` from the agent's API and decode its JSON; every failure is a SystemExit with one
    line that says what went wrong (exit status 1)."""
    url = api.rstrip("/") + path
    try:
        with urllib.request.urlopen(url, timeout=TIMEOUT) as resp:
            body = resp.read()
    except urllib.error.HTTPError as exc:
        text = exc.read().decode(errors="replace").strip()
        try:
            text = json.loads(text)["error"]
        except (ValueError, KeyError, TypeError):
            pass
        raise SystemExit(f"route-agent: the agent at {api} answered {path.split('?')[0]} with "
                         f"HTTP {exc.code}: {text}") from None
    except (OSError, ValueError) as exc:  # refused, no route, timeout; ValueError: a malformed URL
        why = getattr(exc, "reason", None) or exc
        raise SystemExit(f"route-agent: cannot reach the agent at {api}: {why} (is it running? "
                         f"the address is --api or $ROUTE_AGENT_API)") from None
    try:
        return json.loads(body)
    except ValueError:
        raise SystemExit(f"route-agent: the answer from {url} is not JSON (is {api} the agent's "
                         f"API address?): {body[:80]!r}") from None


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


def _print(lines) -> None:
    sys.stdout.write("".join(f"{x}\n" for x in lines))


def _rib_pages(api: str):
    """The RIB page by page, following the `next` cursor of /api/rib: (rows, is the last page)."""
    after = None
    while True:
        query = {"limit": RIB_PAGE} | ({"after": after} if after else {})
        page = _get(api, "/api/rib?" + urllib.parse.urlencode(query))
        after = page["next"]
        yield page["routes"], after is None
        if after is None:
            return


def _show_rib(api: str, as_json: bool) -> None:
    """Page by page as the pages come: text through `clitable.rib_page`; JSON as one list, written
    row by row (the same text `json.dumps(rows, indent=2)` gives), so no page is kept."""
    widths, first = None, True
    for rows, last in _rib_pages(api):
        if not as_json:
            lines, widths = clitable.rib_page(rows, widths, last)
            _print(lines)
            continue
        for row in rows:
            sys.stdout.write(("[\n" if first else ",\n") + textwrap.indent(json.dumps(row, indent=2), "  "))
            first = False
    if as_json:
        sys.stdout.write("[]\n" if first else "\n]\n")


def cmd_show(args) -> int:
    if args.what is None:
        args.parser.error("say what to show: rib, fib, peers or adverts")
    if args.peer and args.what != "adverts":
        args.parser.error("--peer is for `show adverts` only")
    if args.what == "rib":
        _show_rib(args.api, args.json)
        return 0
    query = f"?{urllib.parse.urlencode({'peer': args.peer})}" if args.peer else ""
    data = _get(args.api, f"/api/{args.what}{query}")
    if args.json:
        print(json.dumps(data, indent=2))
        return 0
    render = {"peers": clitable.peers_lines, "adverts": clitable.adverts_lines, "fib": clitable.fib_lines}
    _print(render[args.what](data))
    return 0


def explain_lines(data: dict) -> list[str]:
    """`explain`'s text from /api/explain's JSON: the candidates with their status, the import
    verdict per peer, the export per peer, the deciding step, and the wanted and actual kernel route."""
    out = []
    if "query" in data:  # an address: its longest match, as `ip route get` would pick it
        out.append(f"{data['query']}: longest match {data['prefix'] or '- (no route covers it)'}")
        out += [f"  more specific, not in the kernel: {m['prefix']}: {m['why']}" for m in data["more_specific"]]
        if data["prefix"] is None:
            return out
    out.append(f"{data['prefix']}:")
    if not data["candidates"]:
        out.append("  no candidate from any source")
    for c in data["candidates"]:
        detail = f" ({c['detail']})" if c["detail"] else ""
        bgp = clitable.bgp_parts(c.get("bgp"))
        bgp_text = "  {" + ", ".join(bgp) + "}" if bgp else ""
        out.append(f"  {c['status']:<13} {clitable.origin_text(c)} distance {c['distance']}: {c['route']}{bgp_text}{detail}")
    for b in data.get("bgp", []):
        verdict = "accepted" if b["accepted"] else "rejected"
        path = f" path {b['pathId']}" if b.get("pathId") is not None else ""
        out.append(f"  from peer {b['peer']}{path}: {verdict} by {b['policy'] or '-'} {b['statement']} ({b['description']})")
    for e in data.get("export", []):
        if e["advertised"]:
            state = "announced" if e["announced"] else "pending"
            out.append(f"  advertised to {e['peer']} ({state}; from {', '.join(e['sources'])}; {e['policy']})")
        else:
            out.append(f"  not advertised to {e['peer']}: {e['reason']} ({e['policy'] or '-'} {e['statement']})")
    out.append(f"  decided by: {data['reason']}")
    if data["note"]:
        out.append(f"  {data['note']}")
    out.append(f"  wanted in kernel: {data['desired'] or '-'}")
    out.append(f"  kernel: {data['kernel'] or '-'}  [{data['fib_state']}]")
    return out


def cmd_explain(args) -> int:
    data = _get(args.api, "/api/explain?" + urllib.parse.urlencode({"prefix": args.prefix}))
    _print([json.dumps(data, indent=2)] if args.json else explain_lines(data))
    return 0


def cmd_crds(args) -> int:
    from .config.crds import run

    return run(args.out, check=args.check)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="route-agent", description=__doc__.split("\n")[0])
    p.add_argument("--version", action="version", version=_version())
    p.add_argument("--log-level", default=os.environ.get("ROUTE_AGENT_LOG", "info"),
                   help="debug, info (default), warning or error; default $ROUTE_AGENT_LOG")
    p.add_argument("--log-format", choices=["text", "json"], default=os.environ.get("ROUTE_AGENT_LOG_FORMAT", "text"),
                   help="text (default) or json: one object per line (time, level, logger, message, peer)")
    sub = p.add_subparsers(dest="cmd", required=True, metavar="COMMAND",
                           title="commands (route-agent COMMAND --help for each)")
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
    s = sub.add_parser("show", help="show the RIB, the FIB, the BGP peers or the advertisements of a running agent",
                       usage="%(prog)s [-h] [--json] [--api API] [--peer PEER] {rib,fib,peers,adverts}",
                       description="Print one view of the running agent as an aligned table, or "
                       "with --json as the API returns it (docs/cli.md).")
    s.add_argument("what", nargs="?", choices=SHOW_VIEWS, metavar="VIEW",
                   help="rib (candidates per prefix), fib (our kernel routes), peers (BGP sessions and "
                   "counts), adverts (what is advertised to whom)")
    s.add_argument("--peer", help="adverts: only this peer (address or BgpPeer name)")
    s.add_argument("--json", action="store_true", help="print the API's JSON unchanged")
    s.add_argument("--api", default=api, help=f"the agent's API (default $ROUTE_AGENT_API or {DEFAULT_API})")
    s.set_defaults(fn=cmd_show, parser=s)
    e = sub.add_parser("explain", help="why a prefix is (not) installed; for an address, its "
                       "longest match (as `ip route get` picks it)")
    e.add_argument("prefix", metavar="PREFIX", help="a prefix (explained exactly, also /32) or an address")
    e.add_argument("--json", action="store_true", help="print the API's JSON unchanged")
    e.add_argument("--api", default=api, help=f"the agent's API (default $ROUTE_AGENT_API or {DEFAULT_API})")
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
    except KeyboardInterrupt:
        if args.fn not in (cmd_show, cmd_explain):
            raise
        print(file=sys.stderr)  # Ctrl-C in the middle of a long `show rib`: no traceback
        return 128 + 2  # what a shell reports for a command killed by SIGINT
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
