"""Helpers to run commands in network namespaces (used by the demo, the netns tests and benchmarks).

DOC: thin wrappers over `ip netns` and `ip -n`: create a namespace with loopback up, run a command
inside it, poll a condition with a deadline, and always delete the namespace afterwards;
`sysctl(ns, ...)`, `veth_between(...)` (a link from one namespace to another, carrier up), the
argv/process of the agent run inside a namespace, its API, a thread inside a namespace.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from contextlib import contextmanager


def sh(*args: str, check: bool = True, ns: str | None = None, **kw) -> subprocess.CompletedProcess:
    cmd = ["ip", "netns", "exec", ns, *args] if ns else list(args)
    return subprocess.run(cmd, check=check, capture_output=True, text=True, **kw)


def ip(ns: str, *args: str, check: bool = True) -> str:
    return sh("ip", "-n", ns, *args, check=check).stdout


def ip_json(ns: str, *args: str) -> list:
    out = sh("ip", "-n", ns, "-j", *args).stdout.strip()
    return json.loads(out) if out else []


def add_interface(ns: str, name: str, *addresses: str) -> None:
    """An interface that is up with carrier: one end of a veth pair whose peer (`NAME-p`... cut to
    15 characters) stays in the same namespace (kernels without the dummy driver have veth)."""
    peer = (name + "p")[-15:] if len(name) >= 15 else name + "p"
    ip(ns, "link", "add", name, "type", "veth", "peer", "name", peer)
    for addr in addresses:
        ip(ns, "addr", "add", addr, "dev", name, *(("nodad",) if ":" in addr else ()))
    ip(ns, "link", "set", peer, "up")
    ip(ns, "link", "set", name, "up")


def veth_between(ns: str, dev: str, addr: str, peer_ns: str, peer_dev: str, peer_addr: str,
                 timeout: float = 10.0) -> None:
    """A veth pair `dev` (in `ns`) <-> `peer_dev` (in `peer_ns`) with one address each, both up;
    returns once `dev` has its carrier (up to ~1 s after ``link set up``: the kernel's linkwatch)."""
    ip(ns, "link", "add", dev, "type", "veth", "peer", "name", peer_dev, "netns", peer_ns)
    ip(ns, "addr", "add", addr, "dev", dev)
    ip(peer_ns, "addr", "add", peer_addr, "dev", peer_dev)
    ip(peer_ns, "link", "set", peer_dev, "up")
    ip(ns, "link", "set", dev, "up")
    wait_for(lambda: ip_json(ns, "link", "show", dev)[0].get("operstate") == "UP", timeout, 0.02,
             what=f"veth {dev} in {ns}")


def sysctl(ns: str, *settings: str) -> None:
    """``sysctl -w`` each ``key=value`` of `settings` inside `ns`."""
    sh("sysctl", "-qw", *settings, ns=ns)


def unique(prefix: str) -> str:
    return f"{prefix}{uuid.uuid4().hex[:8]}"


# IPv6 duplicate address detection off for every interface created in a test namespace: with it on,
# an address stays `tentative` for a second or more after its link comes up and the kernel adds
# its `local` route only then, so route events appear at a time that depends on the machine's load.
NO_DAD = ("net.ipv6.conf.all.accept_dad=0", "net.ipv6.conf.default.accept_dad=0")


@contextmanager
def namespace(prefix: str = "ra-"):
    name = unique(prefix)
    sh("ip", "netns", "add", name)
    try:
        sysctl(name, *NO_DAD)
        ip(name, "link", "set", "lo", "up")
        yield name
    finally:
        sh("ip", "netns", "del", name, check=False)


def settled(ns: str) -> bool:
    """True when the kernel has finished its own work for every interface of `ns` that is up with
    carrier: the IPv6 link-local address exists, is no longer tentative, and its `local` route is in
    table local. (Even without DAD the link-local address appears only when the kernel's link
    watcher reports the carrier, up to a second after `ip link set up` on a busy machine.)"""
    links = [l for l in ip_json(ns, "link", "show")
             if l["ifname"] != "lo" and {"UP", "LOWER_UP"} <= set(l.get("flags", ()))]
    if not links:
        return True
    addrs = {a["ifname"]: a.get("addr_info", []) for a in ip_json(ns, "-6", "addr", "show")}
    local = {(r.get("dst"), r.get("dev")) for r in ip_json(ns, "-6", "route", "show", "table", "local")}
    for link in links:
        ll = [a for a in addrs.get(link["ifname"], []) if a.get("scope") == "link"]
        if not ll or any(a.get("tentative") or a.get("dadfailed") for a in ll):
            return False
        if any((a["local"], link["ifname"]) not in local for a in ll):
            return False
    return True


def settle(ns: str, timeout: float = 20.0) -> None:
    """Wait until `settled(ns)`: call before measuring route events in `ns`."""
    wait_for(lambda: settled(ns), timeout, what=f"IPv6 link-local set-up in {ns}")


def wait_for(cond: Callable[[], object], timeout: float = 10.0, interval: float = 0.05, what: str = ""):
    """Poll `cond` until it returns something truthy; raise TimeoutError with `what` otherwise."""
    deadline = time.monotonic() + timeout
    while True:
        value = cond()
        if value:
            return value
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout}s waiting for {what or cond}")
        time.sleep(interval)


def agent_cmd(ns: str, *args: str, python_args: tuple[str, ...] = ()) -> list[str]:
    """The argv that runs `route-agent ARGS` inside namespace `ns` with this interpreter (given
    `python_args` first, e.g. ``("-m", "cProfile", "-o", PATH)``)."""
    return ["ip", "netns", "exec", ns, sys.executable, *python_args, "-m", "agent", *args]


def start_agent(ns: str, config: str, *extra: str, log_path: str | None = None) -> subprocess.Popen:
    out = open(log_path, "ab") if log_path else subprocess.DEVNULL
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    return subprocess.Popen(agent_cmd(ns, "run", "--config", config, *extra), stdout=out,
                            stderr=subprocess.STDOUT, env=env, cwd=os.path.dirname(os.path.dirname(__file__)))


def api_get(ns: str, path: str, port: int = 9180):
    """GET the agent's API inside `ns`; None when it does not answer (yet)."""
    code = ("import sys,urllib.request\n"
            f"try: print(urllib.request.urlopen('http://127.0.0.1:{port}{path}', timeout=2).read().decode())\n"
            "except Exception as e: sys.exit(1)")
    r = sh(sys.executable, "-c", code, ns=ns, check=False)
    return r.stdout if r.returncode == 0 else None


@contextmanager
def in_netns(ns: str):
    """Run the block with this thread in namespace `ns` (sockets opened meanwhile stay there)."""
    from pyroute2 import netns as pr_netns

    pr_netns.pushns(ns)
    try:
        yield
    finally:
        pr_netns.popns()
