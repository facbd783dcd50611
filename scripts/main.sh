#!/usr/bin/env bash
# Installs RepFlow and runs the main job: the seed papers' evaluations in their quick forms
# (RepFlow, SmartRep, L2DCT, FA-DCTCP, MPTCP-L), each under the paper's TCP profile and under
# the data-center profile, resumable, with figures and one report in runs/reproduce-quick/.
set -euo pipefail
cd "$(dirname "$0")/.."
# pip, as root on a fresh machine, warns about running as root (once per pip process, the
# build-isolation ones included) and about newer pip releases: nothing a user of this script
# acts on. The environment variables reach pip's own subprocesses too, unlike a flag.
export PIP_ROOT_USER_ACTION=ignore PIP_DISABLE_PIP_VERSION_CHECK=1
python3 -m pip install --quiet maturin
python3 -m pip install --quiet .
python3 -m repflow reproduce --quick "$@"
