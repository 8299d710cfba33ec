#!/usr/bin/env bash
# README command (a): install, then the agent learning from and advertising to a real BIRD in
# throw-away network namespaces (testlab/demo.py); its output is the README's 5-minute tour.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install.sh
exec .venv/bin/python -m testlab.demo
