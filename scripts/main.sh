#!/usr/bin/env bash
# Installs RepFlow and runs the main job on built-in defaults.
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m pip install --quiet maturin
python3 -m pip install --quiet .
python3 -m repflow sim --scheme repflow --out runs/default "$@"
