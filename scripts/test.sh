#!/usr/bin/env bash
# README command (b): install, then run the whole test suite (unit tests and netns tests; root).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install.sh
exec .venv/bin/python -m pytest -q -p no:cacheprovider tests netns-tests "$@"
