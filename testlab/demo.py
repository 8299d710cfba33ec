"""`scripts/demo.sh`: the agent doing its main job against a real BIRD, in throw-away namespaces.

DOC: two network namespaces joined by a veth pair: ``ra-demo-up-*`` runs an upstream BIRD 2
(AS 65100, 10.99.0.1 and fd00:99::1) announcing a few dozen IPv4 and IPv6 prefixes, among them
a default route, one of this node's own prefixes (a hijack), one tagged with a "do not use"
community and some outside the import policy; ``ra-demo-*`` runs the real agent (AS 65000) with
the bundled `agent/samples/stub-router.yaml`: two eBGP sessions (v4 and v6), an import policy,
and the node's own prefixes advertised back with a community.

It waits until both sessions are up, every accepted route is in the kernel and BIRD has our
prefixes, then prints, in order: `ip route show proto route-agent` (v4 and v6), `route-agent show
peers`, `route-agent explain` of an installed prefix and of the refused default route, and what
the upstream BIRD received from us (`birdc show route protocol ...`). Then it stops the agent and
BIRD and deletes the namespaces. Nothing outside the two namespaces is touched.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import tempfile

from testlab.bird import Bird, base_config, bgp_protocol
from testlab.netns import api_get, ip, namespace, settle, sh, start_agent, veth_between, wait_for

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SAMPLE = os.path.join(ROOT, "agent", "samples", "stub-router.yaml")

ACCEPTED4 = [f"198.18.{i}.0/24" for i in range(24)] + ["198.19.0.0/16"]
ACCEPTED6 = [f"2001:db8:{i:x}::/48" for i in range(1, 9)]
TAGGED = "198.18.100.0/24"  # community 65100:666: refused by the import policy
REFUSED4 = ["0.0.0.0/0", "10.244.1.0/24", "192.0.2.0/24", TAGGED]  # guard, guard, policy, policy
REFUSED6 = ["::/0", "fd00:244:1::/64"]
OURS = ["10.244.1.0/24", "fd00:244:1::/64"]  # what the agent advertises (the sample's Advertisement)


def upstream_config() -> str:
    tag = f"if net = {TAGGED} then bgp_community.add((65100, 666));"
    return base_config("10.99.0.1", ACCEPTED4 + REFUSED4, ACCEPTED6 + REFUSED6) + "".join([
        bgp_protocol("agent4", local="10.99.0.1", local_as=65100, neighbor="10.99.0.254", neighbor_as=65000,
                     export={4: tag}),
        bgp_protocol("agent6", local="fd00:99::1", local_as=65100, neighbor="fd00:99::254", neighbor_as=65000,
                     families=(6,), export={6: ""}),
    ])


def _routes(ns: str, family: int) -> set[str]:
    out = ip(ns, f"-{family}", "-j", "route", "show", "proto", "201", check=False).strip()
    return {r["dst"] if r["dst"] != "default" else ("0.0.0.0/0" if family == 4 else "::/0")
            for r in json.loads(out or "[]")}


def _ready(ns: str, bird: Bird) -> bool:
    peers = json.loads(api_get(ns, "/api/peers") or "[]")
    if sorted(p.get("state") for p in peers) != ["up", "up"]:
        return False
    if _routes(ns, 4) != set(ACCEPTED4) or _routes(ns, 6) != set(ACCEPTED6):
        return False
    got = bird.cmd("show", "route", "protocol", "agent4") + bird.cmd("show", "route", "protocol", "agent6")
    return all(p in got for p in OURS)


def _section(title: str, text: str) -> None:
    print(f"\n$ {title}")
    print(text.rstrip())


def run_demo() -> int:
    if os.geteuid() != 0:
        print("the demo needs root (it creates network namespaces)", file=sys.stderr)
        return 1
    cli = (sys.executable, "-m", "agent")
    with namespace("ra-demo-up-") as up, namespace("ra-demo-") as ns, \
            tempfile.TemporaryDirectory(prefix="ra-demo-") as work:
        veth_between(ns, "ra-demo0", "10.99.0.254/24", up, "up0", "10.99.0.1/24")
        ip(ns, "addr", "add", "fd00:99::254/64", "dev", "ra-demo0", "nodad")
        ip(up, "addr", "add", "fd00:99::1/64", "dev", "up0", "nodad")
        settle(ns)
        settle(up)
        log = os.path.join(work, "agent.log")
        with Bird(up, os.path.join(work, "bird"), upstream_config()) as bird:
            agent = start_agent(ns, SAMPLE, "--state-dir", os.path.join(work, "state"), log_path=log)
            try:
                try:
                    wait_for(lambda: agent.poll() is not None or _ready(ns, bird), timeout=45,
                             what="both sessions up, the routes in the kernel and ours at BIRD")
                except TimeoutError as exc:
                    print(f"{exc}\n--- agent log ---\n{open(log).read()[-4000:]}", file=sys.stderr)
                    return 1
                if agent.poll() is not None:
                    print(open(log).read(), file=sys.stderr)
                    return 1
                print(f"# upstream BIRD (AS 65100) in {up} announces {len(ACCEPTED4) + len(REFUSED4)} IPv4 and "
                      f"{len(ACCEPTED6) + len(REFUSED6)} IPv6 prefixes;\n# the agent (AS 65000) in {ns} "
                      f"runs agent/samples/stub-router.yaml")
                _section("ip route show proto route-agent", ip(ns, "route", "show", "proto", "201"))
                _section("ip -6 route show proto route-agent", ip(ns, "-6", "route", "show", "proto", "201"))
                _section("route-agent show peers", sh(*cli, "show", "peers", ns=ns, cwd=ROOT).stdout)
                _section("route-agent explain 198.18.1.0/24",
                         sh(*cli, "explain", "198.18.1.0/24", ns=ns, cwd=ROOT).stdout)
                _section("route-agent explain 0.0.0.0/0", sh(*cli, "explain", "0.0.0.0/0", ns=ns, cwd=ROOT).stdout)
                _section("birdc show route protocol agent4 all   # upstream: what it learned from us",
                         bird.cmd("show", "route", "protocol", "agent4", "all"))
                _section("birdc show route protocol agent6", bird.cmd("show", "route", "protocol", "agent6"))
            finally:
                agent.send_signal(signal.SIGTERM)
                agent.wait(timeout=20)
    return 0


if __name__ == "__main__":
    sys.exit(run_demo())
