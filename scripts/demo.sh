#!/usr/bin/env bash
# README command (a): install, then run the agent on the bundled sample config in a throw-away
# network namespace and print `ip route show proto route-agent` from inside it.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install.sh
exec .venv/bin/python -m testlab.demo
