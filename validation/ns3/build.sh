#!/usr/bin/env bash
# Builds RepFlow's ns-3 trace drivers (trace-tcp: a star; trace-fattree: a fat-tree with
# per-flow ECMP, TCP and RepFlow) as scratch programs of an ns-3 checkout (nsnam/ns-3-dev), which
# is not part of this repository:
#   bash validation/ns3/build.sh /path/to/ns-3-dev
# Needs cmake and ninja; configures only the modules the driver uses.
set -euo pipefail
ns3=${1:?usage: build.sh NS3_CHECKOUT}
here=$(cd "$(dirname "$0")" && pwd)
cp "$here/trace-tcp.cc" "$ns3/scratch/repflow-trace-tcp.cc"
cp "$here/trace-fattree.cc" "$ns3/scratch/repflow-trace-fattree.cc"
cp "$here/repflow-ns3.h" "$ns3/scratch/repflow-ns3.h"
cmake -S "$ns3" -B "$ns3/build" -G Ninja -DCMAKE_BUILD_TYPE=release -DNS3_EXAMPLES=OFF \
    -DNS3_TESTS=OFF -DNS3_PYTHON_BINDINGS=OFF \
    -DNS3_ENABLED_MODULES="core;network;internet;point-to-point;applications;flow-monitor"
ninja -C "$ns3/build" -j2 scratch_repflow-trace-tcp scratch_repflow-trace-fattree
ls "$ns3"/build/scratch/*repflow-trace-*
