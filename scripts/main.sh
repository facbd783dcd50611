#!/usr/bin/env bash
# Installs RepFlow and runs the main job: the seed papers' evaluations in their quick forms
# (RepFlow, SmartRep, L2DCT, FA-DCTCP, MPTCP-L), each under the paper's TCP profile and under
# the data-center profile, resumable, with figures and one report in runs/reproduce-quick/.
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m pip install --quiet maturin
python3 -m pip install --quiet .
python3 -m repflow reproduce --quick "$@"
