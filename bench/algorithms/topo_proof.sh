#!/usr/bin/env bash
# topo_proof.sh: the node-aware all-reduces proved on this machine (issue 45). Builds
# NODES network-namespace "nodes" of RANKS_PER_NODE ranks, each node with one uplink veth
# into a shared bridge, every uplink capped both ways by a token bucket (tc tbf, RATE
# Mbit/s), so the network and not the CPUs is the bottleneck. Then, for ranks placed node
# by node (collrun --nnodes/--node-rank) and round-robin (rank r on node r mod NODES,
# started by hand: collrun cannot place so), runs allreduce_bench for ring, tree, hd,
# ring_nodes, two_level and auto at every size, reads each uplink's byte counters around
# every run and sets payload bytes and time against coll-sim's timing mode for the same
# algorithm and placement (topo_proof.py beside this script; method in
# bench/results/README.md). Writes bench/results/topo_proof-DATE.{txt,csv,json,png} and
# prints the table.
#
#   bench/algorithms/topo_proof.sh [BUILD_DIR]        (default: build; must be root)
# Environment: NODES (4), RANKS_PER_NODE (2), RATE (200, Mbit/s each way), BURST (16384
#   bytes), ROUNDS (3), SIZES (64K,256K,1M,4M,16M,64M), ALGOS
#   (ring,tree,hd,ring_nodes,two_level,auto), PLACEMENTS (node,rr), OUT_DIR
#   (BUILD_DIR/topo_proof: logs), RESULTS (bench/results), NICE (-10: the ranks' niceness;
#   0 leaves it), SPIN_US (5: COLL_SPIN_US of the ranks, see topo_proof.py).
# No netem in this kernel (tc qdisc ... netem: "Specified qdisc kind is unknown"), so no
# latency is added: the veth's own is measured and given to coll-sim instead.
# Exit status: 0 the runs completed (the table says which cells miss), 1 a run failed,
# 2 setup failure or not root.
[ -n "${BASH_VERSION:-}" ] || exec bash "$0" "$@"
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
build=$(cd "${1:-$root/build}" && pwd) || exit 2
nodes=${NODES:-4}
rpn=${RANKS_PER_NODE:-2}
rate=${RATE:-200}
export TOPO_MTU=${MTU:-9000}
burst=${BURST:-32768}
out=${OUT_DIR:-$build/topo_proof}
results=${RESULTS:-$root/bench/results}
[ "$(id -u)" = 0 ] || { echo "topo_proof: needs root (network namespaces, tc)" >&2; exit 2; }
command -v tc >/dev/null || { echo "topo_proof: no tc (iproute2)" >&2; exit 2; }
ninja -C "$build" bench/allreduce_bench tools/collrun tools/coll-sim >/dev/null || exit 2
mkdir -p "$out" "$results" || exit 2
rm -rf "$out/logs"

source "$root/bench/algorithms/topo_net.sh"
tag=$$
cleanup() { topo_net_down; }
trap cleanup EXIT
trap 'exit 130' INT TERM
# A queue of 16 MiB per tbf: TCP never loses a packet to it (a loss would be resent and
# counted twice); topo_net_drops checks.
topo_net_up "$tag" "$nodes" "$rate" "$burst" $((16 << 20)) || {
  echo "topo_proof: setting up the namespaces failed" >&2
  exit 2
}
echo "topo_proof: $nodes nodes (${TOPO_NS[*]}), bridge $TOPO_BR_NS, tbf $rate Mbit/s burst $burst B each way, MTU $TOPO_MTU"
if ip netns exec "${TOPO_NS[0]}" tc qdisc add dev lo root netem delay 1ms 2>/dev/null; then
  ip netns exec "${TOPO_NS[0]}" tc qdisc del dev lo root
  echo "topo_proof: netem is available but not used (the script measures the veth's latency)"
else
  echo "topo_proof: netem is not available in this kernel: no latency added"
fi

TOPO_NS="${TOPO_NS[*]}" TOPO_ADDR="${TOPO_ADDR[*]}" /usr/bin/python3 \
  "$root/bench/algorithms/topo_proof.py" \
  --build "$build" --out "$out" --ranks-per-node "$rpn" --rate-mbit "$rate" \
  --rounds "${ROUNDS:-3}" --sizes "${SIZES:-64K,256K,1M,4M,16M,64M}" \
  --algos "${ALGOS:-ring,tree,hd,ring_nodes,two_level,auto}" \
  --placements "${PLACEMENTS:-node,rr}" --nice "${NICE:--10}" --spin-us "${SPIN_US:-5}" --transport "${TRANSPORT:-}" --mtu "$TOPO_MTU"
status=$?
drops=$(topo_net_drops)
echo "topo_proof: packets the tbf queues dropped: $drops"
[ $status = 0 ] || exit 1
stamp=$(date -u +%Y-%m-%d)-$(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo nogit)
for f in txt csv json; do cp "$out/topo_proof.$f" "$results/topo_proof-$stamp.$f"; done
cp "$out/topo_proof_raw.csv" "$results/topo_proof-$stamp-raw.csv"
{
  echo "packets the tbf queues dropped: $drops"
  # The build is of the working tree: say what it held beyond the commit.
  echo "built from $(git -C "$root" rev-parse --short HEAD 2>/dev/null) with" \
    "$(git -C "$root" status --porcelain --untracked-files=no 2>/dev/null | wc -l) files changed on top"
} >>"$results/topo_proof-$stamp.txt"
if command -v gnuplot >/dev/null; then
  gnuplot -e "csv='$out/topo_proof.csv'; png='$results/topo_proof-$stamp.png'" \
    "$root/bench/algorithms/topo_proof.gp" &&
    echo "topo_proof: plot $results/topo_proof-$stamp.png"
fi
echo "topo_proof: results in $results/topo_proof-$stamp.*"
