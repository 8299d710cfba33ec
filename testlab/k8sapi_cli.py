"""``python -m testlab.k8sapi``: the test API server by hand, for kubectl and a local agent.

DOC: starts `testlab.k8sapi.KubeApiServer` on 127.0.0.1 (``--port``, default 18080; 0 picks a
free one), writes a kubeconfig (``--kubeconfig``, default ``./kubeconfig.testapi``) and prints
how to use it, then serves until Ctrl-C / SIGTERM. ``--node NAME[=POD_CIDR[,IP]]`` (repeatable)
creates Nodes for agents to serve; ``--crds DIR`` applies the CRDs in DIR first (e.g.
``deploy/crds``; ``kubectl apply -k deploy/`` does the same and more). Nothing here is part of the
product package: it lives in ``testlab/`` and is never installed.

    python -m testlab.k8sapi --port 18080 --node node-a=10.244.1.0/24,10.0.0.11
    export KUBECONFIG=$PWD/kubeconfig.testapi
    kubectl apply -k deploy/ && kubectl apply -f deploy/sample-config.yaml
    route-agent run --kubernetes --node-name node-a --state-dir /tmp/ra
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading
from pathlib import Path

import yaml


def _node(spec: str) -> dict:
    from testlab.k8sapi import node

    name, _, rest = spec.partition("=")
    cidr, _, ip = rest.partition(",")
    return node(name, [cidr] if cidr else [], [ip] if ip else [])


def main(argv: list[str] | None = None) -> int:
    from testlab.k8sapi import KubeApiServer

    p = argparse.ArgumentParser(prog="python -m testlab.k8sapi", description=__doc__.split("\n")[0])
    p.add_argument("--port", type=int, default=18080, help="listen port on 127.0.0.1 (0: any free one)")
    p.add_argument("--kubeconfig", default="kubeconfig.testapi", help="where to write the kubeconfig")
    p.add_argument("--node", action="append", default=[], metavar="NAME[=POD_CIDR[,IP]]",
                   help="create a Node (repeatable)")
    p.add_argument("--crds", metavar="DIR", help="apply the CustomResourceDefinitions in DIR first")
    args = p.parse_args(argv)
    server = KubeApiServer(port=args.port)
    for spec in args.node:
        server.put(_node(spec))
    if args.crds:
        for path in sorted(Path(args.crds).glob("*.yaml")):
            for doc in yaml.safe_load_all(path.read_text()):
                if doc and doc.get("kind") == "CustomResourceDefinition":
                    server.put(doc)
    server.start()
    kubeconfig = server.kubeconfig(Path(args.kubeconfig).resolve())
    print(f"test API server on {server.url}\nexport KUBECONFIG={kubeconfig}", flush=True)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    try:
        stop.wait()
    except KeyboardInterrupt:
        pass
    server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
