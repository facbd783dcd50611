#!/usr/bin/env bash
# Builds RepFlow's htsim trace drivers against an htsim checkout (Broadcom/csg-htsim), which is
# not part of this repository:
#   bash validation/htsim/build.sh /path/to/csg-htsim [OUT [OUT_MPTCP]]
# OUT is the TCP driver (trace_tcp.cpp), OUT_MPTCP the MPTCP driver (trace_mptcp.cpp; by
# default trace_mptcp beside OUT); the scheme driver (trace_schemes.cpp: TCP, RepFlow, DCTCP,
# RepFlow-DCTCP) is built as trace_schemes beside OUT.
set -euo pipefail
htsim=${1:?usage: build.sh HTSIM_CHECKOUT [OUT [OUT_MPTCP]]}
here=$(dirname "$0")
out=${2:-$here/trace_tcp}
out_mptcp=${3:-$(dirname "$out")/trace_mptcp}
sim="$htsim/sim"
[ -f "$sim/libhtsim.a" ] || make -C "$sim" -j2
make -C "$sim/datacenter" -j2 fat_tree_topology.o fat_tree_switch.o firstfit.o connection_matrix.o
objs=("$sim/datacenter/fat_tree_topology.o" "$sim/datacenter/fat_tree_switch.o"
      "$sim/datacenter/firstfit.o" "$sim/datacenter/connection_matrix.o")
g++ -std=c++11 -O2 -I"$sim" -I"$sim/datacenter" "$here/trace_tcp.cpp" "${objs[@]}" \
    -L"$sim" -lhtsim -o "$out"
echo "built $out"
g++ -std=c++11 -O2 -Wall -I"$sim" -I"$sim/datacenter" "$here/trace_mptcp.cpp" "${objs[@]}" \
    -L"$sim" -lhtsim -o "$out_mptcp"
echo "built $out_mptcp"
out_schemes=$(dirname "$out")/trace_schemes
g++ -std=c++11 -O2 -Wall -I"$sim" -I"$sim/datacenter" "$here/trace_schemes.cpp" "${objs[@]}" \
    -L"$sim" -lhtsim -o "$out_schemes"
echo "built $out_schemes"
