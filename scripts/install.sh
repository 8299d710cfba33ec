#!/usr/bin/env bash
# Install everything route-agent and its tests need on Debian, as root, from a clean clone:
# iproute2, bird2 and frr (the two BGP peers of the netns tests; the tests run their own daemons,
# never the frr service) from Debian, a virtualenv in .venv with the pinned Python packages, and
# the name of our route protocol for iproute2 (so `ip route` prints "proto route-agent").
set -euo pipefail
cd "$(dirname "$0")/.."

need=()
command -v ip >/dev/null 2>&1 || need+=(iproute2)
command -v bird >/dev/null 2>&1 || need+=(bird2)
[ -x /usr/lib/frr/bgpd ] && command -v vtysh >/dev/null 2>&1 || need+=(frr)
command -v python3 >/dev/null 2>&1 || need+=(python3)
python3 -c 'import ensurepip, venv' >/dev/null 2>&1 || need+=(python3-venv)
if ((${#need[@]})); then
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null
fi

[ -x .venv/bin/python ] || python3 -m venv .venv
.venv/bin/pip install -q --disable-pip-version-check -e '.[test]' 2>&1 | grep -v '^WARNING: Location' || true
.venv/bin/python -c 'import agent, pyroute2, exabgp, prometheus_client, pydantic' 

mkdir -p /etc/iproute2/rt_protos.d
echo "201 route-agent" > /etc/iproute2/rt_protos.d/route-agent.conf
