#!/usr/bin/env bash
# Builds RepFlow's htsim trace driver against an htsim checkout (Broadcom/csg-htsim), which is
# not part of this repository: bash validation/htsim/build.sh /path/to/csg-htsim [OUT]
set -euo pipefail
htsim=${1:?usage: build.sh HTSIM_CHECKOUT [OUT]}
out=${2:-$(dirname "$0")/trace_tcp}
sim="$htsim/sim"
[ -f "$sim/libhtsim.a" ] || make -C "$sim" -j2
make -C "$sim/datacenter" -j2 fat_tree_topology.o fat_tree_switch.o firstfit.o connection_matrix.o
g++ -std=c++11 -O2 -I"$sim" -I"$sim/datacenter" "$(dirname "$0")/trace_tcp.cpp" \
    "$sim/datacenter/fat_tree_topology.o" "$sim/datacenter/fat_tree_switch.o" \
    "$sim/datacenter/firstfit.o" "$sim/datacenter/connection_matrix.o" \
    -L"$sim" -lhtsim -o "$out"
echo "built $out"
