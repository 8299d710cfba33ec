#!/usr/bin/env bash
# README command (b): install, check the import layers, then run the whole test suite (unit tests
# and netns tests; root).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install.sh
.venv/bin/lint-imports --no-cache  # the layers of .importlinter: imports go downward only, no cycles
exec .venv/bin/python -m pytest -q -p no:cacheprovider tests netns-tests "$@"
