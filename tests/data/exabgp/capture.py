"""Capture real ExaBGP 5 API output from sessions with a real BIRD 2 (needs root).

DOC: run ``.venv/bin/python tests/data/exabgp/capture.py`` as root to regenerate the ``*.jsonl``
files next to this script. Two namespaces joined by a veth pair: BIRD (10.99.0.1, 10.99.0.3,
fd99::1) and ExaBGP (10.99.0.2, 10.99.0.4 for iBGP, fd99::2), configured by `agent.speaker.exabgp_conf.render`. The
API helper is this script in ``helper`` mode: it appends every line ExaBGP writes to a file and
forwards the lines written to a FIFO to ExaBGP as commands.

Sessions: ``e4`` eBGP over IPv4 (IPv4 unicast), ``e6`` eBGP over IPv6 (IPv6 unicast; BIRD sends
global and link-local next hops on the shared link), ``i4`` iBGP over IPv4 carrying IPv4 and IPv6
unicast (local-pref, MED). BIRD announces routes with communities, large communities, MED and
prepended AS paths; the script then changes and removes routes (withdraws), sends commands
(route refresh, an invalid command for ``error``), has BIRD ask for a route refresh, and disables
the protocols (notification, with an RFC 8203 message for ``e6``, and state down), and
finally restarts BIRD gracefully (sessions drop without NOTIFICATION; the new OPENs carry the
restart bit).

Every captured line goes to ``session.jsonl`` in order; the timestamps, pids and host name are
rewritten to fixed values so that the file does not change without a reason.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[2]


def helper(out: str, fifo: str) -> None:
    import threading

    def commands():
        while True:
            with open(fifo) as f:
                for line in f:
                    sys.stdout.write(line)
                    sys.stdout.flush()

    threading.Thread(target=commands, daemon=True).start()
    with open(out, "a") as f:
        for line in sys.stdin:
            f.write(line)
            f.flush()


def main() -> None:
    sys.path.insert(0, str(ROOT))
    from testlab.netns import ip, namespace, sh, wait_for
    from testlab.bird import Bird, base_config, bgp_protocol
    from agent.speaker.exabgp_conf import render
    from agent.config.bgp import BgpPeer, BgpSpeakerSpec

    work = Path("/tmp/ra-capture")
    subprocess.run(["rm", "-rf", str(work)])
    work.mkdir()
    out, fifo = work / "out.jsonl", work / "cmd.fifo"
    os.mkfifo(fifo)
    with namespace("ra-cb-") as nb, namespace("ra-ce-") as ne:
        for ns in (nb, ne):
            sh("sysctl", "-qw", "net.ipv6.conf.all.accept_dad=0", "net.ipv6.conf.default.accept_dad=0", ns=ns)
        ip(nb, "link", "add", "eb", "type", "veth", "peer", "name", "ee", "netns", ne)
        ip(nb, "addr", "add", "10.99.0.1/24", "dev", "eb")
        ip(nb, "addr", "add", "10.99.0.3/24", "dev", "eb")
        ip(nb, "addr", "add", "fd99::1/64", "dev", "eb", "nodad")
        ip(ne, "addr", "add", "10.99.0.2/24", "dev", "ee")
        ip(ne, "addr", "add", "10.99.0.4/24", "dev", "ee")
        ip(ne, "addr", "add", "fd99::2/64", "dev", "ee", "nodad")
        ip(nb, "link", "set", "eb", "up")
        ip(ne, "link", "set", "ee", "up")
        wait_for(lambda: "fe80" in ip(nb, "-6", "addr", "show", "dev", "eb"), 5, what="link-local")

        def peer(name, addr, asn, **kw):
            return BgpPeer.model_validate({"metadata": {"name": name}, "spec": {
                "peerAddress": addr, "peerAS": asn, "localAS": 65001, "routerId": "10.99.0.2",
                "holdTime": 9, **kw}})

        peers = [
            peer("e4", "10.99.0.1", 65000, localAddress="10.99.0.2"),
            peer("e6", "fd99::1", 65000, localAddress="fd99::2", passive=True),
            peer("i4", "10.99.0.3", 65001, localAddress="10.99.0.4",
                 families=["ipv4-unicast", "ipv6-unicast"]),
        ]
        conf = render(peers, BgpSpeakerSpec(listenAddresses=["10.99.0.2", "10.99.0.4", "fd99::2"]),
                      [sys.executable, str(Path(__file__).resolve()), "helper", str(out), str(fifo)])
        (work / "exabgp.conf").write_text(conf.text)
        (work / "empty.env").write_text("")

        def bird_conf(stage: int) -> str:
            s4 = ["192.0.2.0/24", "198.51.100.0/24", "203.0.113.0/25", "203.0.113.128/25"]
            s6 = ["2001:db8:1::/48", "2001:db8:2::/48", "2001:db8:3::/48"]
            if stage >= 1:
                s4.remove("203.0.113.128/25")
                s6.remove("2001:db8:2::/48")
            med = 50 if stage == 0 else 60
            e4 = (f"if net = 192.0.2.0/24 then {{ bgp_community.add((65000,100)); "
                  f"bgp_community.add((65000,200)); bgp_large_community.add((65000,1,2)); "
                  f"bgp_med = {med}; bgp_path.prepend(64512); bgp_path.prepend(64513); }} "
                  "else { bgp_community.add((65000,300)); }")
            e6 = ("if net = 2001:db8:1::/48 then { bgp_large_community.add((65000,6,6)); "
                  "bgp_large_community.add((4200000000,1,1)); bgp_origin = ORIGIN_INCOMPLETE; }")
            i4 = ("bgp_local_pref = 250; bgp_med = 7; bgp_community.add((65001,1));")
            i6 = "bgp_local_pref = 150;"
            return base_config("10.99.0.1", s4, s6) + "\n".join([
                bgp_protocol("e4", local="10.99.0.1", local_as=65000, neighbor="10.99.0.2",
                             neighbor_as=65001, export={4: e4}),
                bgp_protocol("e6", local="fd99::1", local_as=65000, neighbor="fd99::2",
                             neighbor_as=65001, families=(6,), export={6: e6}),
                bgp_protocol("i4", local="10.99.0.3", local_as=65001, neighbor="10.99.0.4",
                             neighbor_as=65001, families=(4, 6), export={4: i4, 6: i6},
                             channel_extra={6: "next hop address fd99::1;"}, extra="    direct;"),
            ])

        bird = Bird(nb, work / "bird", bird_conf(0))
        env = dict(os.environ, EXABGP_ENVFILE=str(work / "empty.env"), **conf.env)
        exa_log = open(work / "exabgp.log", "wb")
        exa = subprocess.Popen(["ip", "netns", "exec", ne, sys.executable, "-m", "exabgp", "server",
                                str(work / "exabgp.conf")], env=env, stdout=exa_log,
                               stderr=subprocess.STDOUT)

        def lines():
            return out.read_text().splitlines() if out.exists() else []

        def count(pattern: str) -> int:
            return sum(bool(re.search(pattern, l)) for l in lines())

        def send(cmd: str) -> None:
            with open(fifo, "w") as f:
                f.write(cmd + "\n")

        try:
            wait_for(lambda: count('"eor"') >= 4, 30, what="4 EoRs")
            bird.reconfigure(bird_conf(1))
            wait_for(lambda: count('"withdraw"') >= 2 and count('"med": 60') >= 1, 15, what="withdraws")
            n = len(lines())
            send("announce route-refresh ipv4 unicast")
            wait_for(lambda: len(lines()) > n + 2 and "done" in lines()[n:], 15, what="refresh")
            send("neighbor 10.99.0.1 announce route 10.200.0.0/24 next-hop self as-path [ 65001 ] "
                 "community [ 65001:5 ] large-community [ 65001:5:5 ] med 5")
            send("this is not a command")
            wait_for(lambda: "error" in lines(), 15, what="error ack")
            bird.cmd("reload", "in", "e4")
            wait_for(lambda: count('"route-refresh"') >= 1, 15, what="route refresh from BIRD")
            bird.cmd("disable", "e4")
            wait_for(lambda: count('"state": "down"') >= 1, 15, what="e4 down")
            bird.cmd("disable", "e6", '"maintenance window"')
            wait_for(lambda: count('"state": "down"') >= 2, 15, what="e6 down")
            bird.cmd("enable", "e4")
            bird.cmd("enable", "e6")
            wait_for(lambda: count('"state": "up"') >= 5, 30, what="e4, e6 up again")
            wait_for(lambda: count('"eor"') >= 6, 30, what="eor again")
            # BIRD restarts gracefully: its sessions close without NOTIFICATION, and its next OPEN
            # carries the R (restarting) bit
            bird.cmd("graceful", "restart", check=False)
            bird.proc.wait(10)
            bird.close()
            wait_for(lambda: count('"state": "down"') >= 5, 30, what="down after graceful restart")
            bird = Bird(nb, work / "bird", bird_conf(1), recovery=True)
            wait_for(lambda: count('"state": "up"') >= 8, 30, what="sessions back after BIRD restart")
            # a BIRD in restart recovery sends nothing before it has End-of-RIB from every peer,
            # and ExaBGP runs with manual-eor: the agent must send it
            send("neighbor 10.99.0.1 announce eor ipv4 unicast")
            send("neighbor fd99::1 announce eor ipv6 unicast")
            send("neighbor 10.99.0.3 announce eor ipv4 unicast")
            send("neighbor 10.99.0.3 announce eor ipv6 unicast")
            wait_for(lambda: count('"eor"') >= 10, 30, what="eor after BIRD restart")
        except Exception:
            print(bird.cmd("show", "protocols", "all"), file=sys.stderr)
            raise
        finally:
            exa.terminate()
            exa.wait(10)
            exa_log.close()
            bird.close()
    normalise(out, HERE / "session.jsonl")


def normalise(src: Path, dst: Path) -> None:
    """Fixed time/host/pid so that a re-capture only differs where ExaBGP's output differs."""
    out = []
    for line in src.read_text().splitlines():
        line = re.sub(r'^(\{ "exabgp": "[^"]*", "time": )[0-9.]+', r'\g<1>1700000000.0', line)
        line = re.sub(r'"host" : "[^"]*"', '"host" : "capture"', line)
        line = re.sub(r'"pid" : \d+', '"pid" : 1000', line)
        line = re.sub(r'"ppid" : \d+', '"ppid" : 999', line)
        out.append(line)
    dst.write_text("\n".join(out) + "\n")


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "helper":
        helper(sys.argv[2], sys.argv[3])
    else:
        main()
