#!/usr/bin/env bash
# Installs RepFlow and runs the main job: the RepFlow paper's simulation study in its quick form
# (8-pod fat-tree, web search and data mining; TCP, RepFlow, DCTCP, RepFlow-DCTCP, pFabric),
# resumable, with figures and a report in runs/repflow-paper-quick/.
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m pip install --quiet maturin
python3 -m pip install --quiet .
python3 -m repflow reproduce --quick "$@"
