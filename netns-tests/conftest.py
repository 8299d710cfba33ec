"""Fixtures for tests against the real kernel: namespaces, the real agent, `ip monitor`.

Every namespace a test creates is deleted in teardown, and every agent process is killed.
Waiting is always polling with a deadline (`wait_for`), never a bare sleep. A failing test's
report ends with the log of each agent it ran (the last 5000 characters), so a failure on CI can
be read without running it again.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time

import pytest

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from testlab.netns import add_interface, api_get, ip, ip_json, namespace, start_agent, wait_for  # noqa: E402
from testlab.monitor import Monitor  # noqa: E402

PROTO = 201


def pytest_collection_modifyitems(config, items):
    here = os.path.dirname(os.path.abspath(__file__))
    for item in items:
        if str(item.fspath).startswith(here):
            item.add_marker(pytest.mark.netns)
            if os.geteuid() != 0:
                item.add_marker(pytest.mark.skip(reason="needs root for network namespaces"))


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    report = (yield).get_result()
    if report.failed and report.when == "call":
        seen = set()
        for name, value in getattr(item, "funcargs", {}).items():
            node = value if isinstance(value, Node) else getattr(value, "node", None)
            if isinstance(node, Node) and id(node) not in seen and node.logtext():
                seen.add(id(node))
                report.sections.append((f"agent log ({name})", node.logtext()))


HEADER = "apiVersion: routeagent.io/v1alpha1\n"


def static_routes(name: str, routes_yaml: str) -> str:
    return f"{HEADER}kind: StaticRoutes\nmetadata:\n  name: {name}\nspec:\n  routes:\n{routes_yaml}"


def agent_config(spec_yaml: str) -> str:
    return f"{HEADER}kind: AgentConfig\nmetadata:\n  name: node\nspec:\n{spec_yaml}"


class _Found(dict):
    """A result that counts as found even when empty (`wait_for` polls until truthy)."""

    def __bool__(self) -> bool:
        return True


class Node:
    """One namespace with two uplinks (veth pairs), a config directory and the real agent."""

    def __init__(self, ns: str, tmp) -> None:
        self.ns = ns
        self.dir = tmp / "config"
        self.dir.mkdir()
        self.log = str(tmp / "agent.log")
        self.state = tmp / "state"
        self.procs: list[subprocess.Popen] = []
        for i, dev in enumerate(("up0", "up1")):
            add_interface(ns, dev, f"10.0.{i}.254/24", f"fd00:{i}::254/64")

    # ---- config ----
    def write(self, name: str, text: str) -> None:
        path = self.dir / name
        tmp = path.with_suffix(".tmp")
        tmp.write_text(text)
        os.replace(tmp, path)

    # ---- agent ----
    def start(self, *extra: str, wait: bool = True) -> subprocess.Popen:
        proc = start_agent(self.ns, str(self.dir), "--state-dir", str(self.state), *extra, log_path=self.log)
        self.procs.append(proc)
        if wait:
            self.wait_ready(proc)
        return proc

    def wait_ready(self, proc=None, timeout: float = 20) -> None:
        def ready():
            if proc is not None and proc.poll() is not None:
                raise AssertionError(f"agent exited with {proc.returncode}:\n{self.logtext()}")
            return api_get(self.ns, "/readyz") is not None
        wait_for(ready, timeout, what="agent ready")

    def kill(self, proc, sig=signal.SIGKILL) -> None:
        proc.send_signal(sig)
        proc.wait(15)

    def api(self, path: str):
        text = api_get(self.ns, path)
        return json.loads(text) if text and path.startswith("/api") else text

    def converged(self):
        fib = self.api("/api/fib")
        return fib if fib and fib["gate_open"] and not fib["pending"] else None

    def logtext(self) -> str:
        try:
            return open(self.log).read()[-5000:]
        except OSError:
            return ""

    # ---- kernel ----
    def routes(self, family: int = 4, table: str | int = "main", proto: int | str | None = PROTO) -> dict:
        args = [f"-{family}", "route", "show", "table", str(table)]
        if proto is not None:
            args += ["proto", str(proto)]
        return {r["dst"]: one_hop_view(r) for r in ip_json(self.ns, *args)}

    def wait_routes(self, cond, family=4, timeout=10, **kw) -> dict:
        """Poll `ip -j route` until `cond(routes)`; returns the routes (possibly empty)."""
        return wait_for(lambda: (lambda r: _Found(r) if cond(r) else None)(self.routes(family, **kw)),
                        timeout, what=f"routes matching {cond}")

    def close(self) -> None:
        for p in self.procs:
            if p.poll() is None:
                p.kill()
                p.wait(10)


@pytest.fixture
def node(tmp_path):
    with namespace("ra-t-") as ns:
        n = Node(ns, tmp_path)
        try:
            yield n
        finally:
            n.close()
            if os.environ.get("RA_SHOW_LOG"):
                print(n.logtext())


@pytest.fixture
def monitor_factory():
    mons = []

    def make(ns):
        m = Monitor(ns)
        mons.append(m)
        return m

    yield make
    for m in mons:
        m.close()


def one_hop_view(route: dict) -> dict:
    """An IPv6 route through a one-member nexthop group (`nhid`, the default FIB mode) as `ip -j`
    shows a plain one-hop route: the kernel reports it as a `nexthops` list of one (IPv4 as a
    plain `gateway`/`dev`), while it forwards exactly like ``via G dev D``. Other routes as given."""
    hops = route.get("nexthops")
    if "nhid" in route and "gateway" not in route and hops and len(hops) == 1:
        route = {k: v for k, v in route.items() if k != "nexthops"} | {
            k: hops[0][k] for k in ("gateway", "dev") if k in hops[0]}
    return route


def without_nhid(text: str) -> str:
    """`ip route` / `show fib` text without the ``nhid N`` of routes through nexthop objects."""
    return re.sub(r" nhid \d+", "", text)


def gateways(route: dict) -> list[str]:
    if "nexthops" in route:
        return sorted(nh["gateway"] for nh in route["nexthops"])
    return [route["gateway"]] if "gateway" in route else []


def elapsed(t0: float) -> float:
    return time.monotonic() - t0


# ---------------------------------------------------------------- BGP: a BIRD 2 "ToR" and the agent
from testlab.bird import Bird, base_config, bgp_protocol  # noqa: E402


def bgp_peer(name: str, address: str, local: str, *, peer_as: int = 65001, local_as: int = 65000,
             extra: str = "") -> str:
    spec = (f"  peerAddress: \"{address}\"\n  peerAS: {peer_as}\n  localAS: {local_as}\n"
            f"  routerId: 10.0.0.254\n  localAddress: \"{local}\"\n  holdTime: 9\n{extra}")
    return f"{HEADER}kind: BgpPeer\nmetadata:\n  name: {name}\nspec:\n{spec}"


class BgpLab:
    """Namespace `tor` (BIRD, 10.0.0.1 / fd00::1, and 10.0.1.1 / fd00:1::1 for a second BIRD)
    joined by veth pairs to the agent's namespace `node` (10.0.0.254 / fd00::254 on up0,
    10.0.1.254 / fd00:1::254 on up1)."""

    def __init__(self, node: Node, tor: str, tmp) -> None:
        self.node, self.tor, self.tmp = node, tor, tmp
        self.birds: dict[str, Bird] = {}

    def bird(self, name: str, config: str) -> Bird:
        b = Bird(self.tor, self.tmp / name, config)
        self.birds[name] = b
        return b

    def close(self) -> None:
        for b in self.birds.values():
            b.close()


def tor_config(static4=(), static6=(), *, router_id="10.0.0.1", local4="10.0.0.1", local6="fd00::1",
               neighbor4="10.0.0.254", neighbor6="fd00::254", asn=65001, gr=True, export4="",
               export6="", extra="", bgp_extra="") -> str:
    """A BIRD announcing `static4`/`static6` (blackholes in BIRD) to the agent over a v4 and a v6
    session; `export4`/`export6` are filter statements run before `accept`."""
    protocols = [
        bgp_protocol("n4", local=local4, local_as=asn, neighbor=neighbor4, neighbor_as=65000,
                     export={4: export4}, graceful_restart=gr, extra=bgp_extra),
        bgp_protocol("n6", local=local6, local_as=asn, neighbor=neighbor6, neighbor_as=65000,
                     families=(6,), export={6: export6}, graceful_restart=gr, extra=bgp_extra),
    ]
    return base_config(router_id, list(static4), list(static6), extra) + "\n".join(protocols)


@pytest.fixture
def bgp_lab(node, tmp_path):
    from testlab.netns import namespace as _ns

    with _ns("ra-tor-") as tor:
        for i in (0, 1):  # replace the node's veth uplinks by veths into the ToR namespace
            ip(node.ns, "link", "del", f"up{i}")
            ip(node.ns, "link", "add", f"up{i}", "type", "veth", "peer", "name", f"tor{i}", "netns", tor)
            ip(node.ns, "addr", "add", f"10.0.{i}.254/24", "dev", f"up{i}")
            ip(node.ns, "addr", "add", f"fd00:{i}::254/64", "dev", f"up{i}", "nodad")
            ip(tor, "addr", "add", f"10.0.{i}.1/24", "dev", f"tor{i}")
            ip(tor, "addr", "add", f"fd00:{i}::1/64", "dev", f"tor{i}", "nodad")
            ip(tor, "link", "set", f"tor{i}", "up")
            ip(node.ns, "link", "set", f"up{i}", "up")
        lab = BgpLab(node, tor, tmp_path)
        try:
            yield lab
        finally:
            node.close()
            lab.close()
