# topo_net.sh: sourced by topo_proof.sh beside it. Builds NNODES network-namespace
# "nodes", each with ONE uplink veth ("uplink", 10.97.0.<i+1>/24) into a bridge that lives in a
# namespace of its own, every uplink capped in both directions by a token bucket (tc tbf on
# the node side's egress and on the bridge port's egress), and takes it all down again.
#
#        node 0 (ns)            bridge (ns)               node 1 (ns)
#   ranks 0,4 --shm-- uplink =tbf=> tp0 --br0-- tp1 <=tbf= uplink --shm-- ranks 1,5
#                        <==tbf==               ==tbf==>
#
# Functions (all return non-zero and say why on stderr when a command fails):
#   topo_net_up TAG NNODES RATE_MBIT BURST_BYTES LIMIT_BYTES   sets TOPO_NS[] TOPO_BR_NS TOPO_ADDR[]
#   topo_net_down                                              removes every namespace made
#   topo_net_counters                                          one line per node:
#       "NODE tx_bytes tx_packets rx_bytes rx_packets" of the node side of its uplink
#   topo_net_drops                                             total packets the tbf qdiscs dropped

TOPO_NS=()
TOPO_ADDR=()
TOPO_BR_NS=""

topo_net_up() {
  local tag=$1 nnodes=$2 rate=$3 burst=$4 limit=$5 i
  TOPO_BR_NS="tpbr-$tag"
  ip netns add "$TOPO_BR_NS" || return 1
  ip -n "$TOPO_BR_NS" link set lo up &&
    ip -n "$TOPO_BR_NS" link add br0 type bridge &&
    ip -n "$TOPO_BR_NS" link set br0 up || return 1
  for ((i = 0; i < nnodes; i++)); do
    TOPO_NS[i]="tpn$i-$tag"
    TOPO_ADDR[i]="10.97.0.$((i + 1))"
    ip netns add "${TOPO_NS[i]}" || return 1
    # "uplink" in the node, "tp<i>" its peer in the bridge's namespace.
    ip link add name uplink netns "${TOPO_NS[i]}" type veth peer name "tp$i" netns "$TOPO_BR_NS" &&
      ip -n "$TOPO_BR_NS" link set "tp$i" master br0 &&
      ip -n "$TOPO_BR_NS" link set "tp$i" up &&
      ip -n "${TOPO_NS[i]}" addr add "${TOPO_ADDR[i]}/24" dev uplink &&
      ip -n "${TOPO_NS[i]}" link set lo up &&
      ip -n "${TOPO_NS[i]}" link set dev uplink mtu "${TOPO_MTU:-1500}" &&
      ip -n "$TOPO_BR_NS" link set dev "tp$i" mtu "${TOPO_MTU:-1500}" &&
      ip -n "${TOPO_NS[i]}" link set dev uplink up || return 1
    # This path loses nothing but reordered: a tbf is emptied on whichever CPU runs its
    # timer or its sender, and veth hands each packet to that CPU's backlog, each CPU's
    # delivered on its own (nstat: TCPSACKReorder in the hundreds per 16 MiB ring, fast
    # retransmits and DSACKs: resent payload, counted twice by the counters, and halved
    # windows). RPS to CPU 0 on every port puts every packet on one backlog, in order
    # (TOPO_RPS=0 to see the reordering).
    if [ "${TOPO_RPS:-1}" = 1 ]; then
      ip netns exec "${TOPO_NS[i]}" sh -c 'for q in /sys/class/net/uplink/queues/rx-*/rps_cpus; do
        echo 1 >"$q"; done' &&
        ip netns exec "$TOPO_BR_NS" sh -c "for q in /sys/class/net/tp$i/queues/rx-*/rps_cpus; do
          echo 1 >\"\$q\"; done" || return 1
    fi
    # What was left were tail-loss probes (TCPLossProbes, each answered by a DSACK: the
    # probed segment had arrived, its ACK was behind the tbf queue): off in the node
    # namespaces (their own sysctl; the host's is untouched), TOPO_TLP=1 keeps them.
    if [ "${TOPO_TLP:-0}" = 0 ]; then
      ip netns exec "${TOPO_NS[i]}" sysctl -qw net.ipv4.tcp_early_retrans=0 || return 1
    fi
    # The cap, both directions: what leaves the node (its "uplink") and what the bridge sends
    # into it (the bridge port). tbf counts the bytes of each packet as the device sends
    # them (Ethernet + IP + TCP headers + payload); a limit large enough that TCP never
    # sees a drop (a retransmission would put payload twice on the counters).
    ip netns exec "${TOPO_NS[i]}" tc qdisc add dev uplink root tbf rate "${rate}mbit" \
      burst "$burst" limit "$limit" &&
      ip netns exec "$TOPO_BR_NS" tc qdisc add dev "tp$i" root tbf rate "${rate}mbit" \
        burst "$burst" limit "$limit" || return 1
  done
  # Every node reaches node 0 (the bridge learns addresses; ARP answered).
  for ((i = 1; i < nnodes; i++)); do
    local ok=0 _
    for _ in $(seq 50); do
      # Port 9 has no listener: "refused" means the packet went there and back.
      case $(ip netns exec "${TOPO_NS[i]}" bash -c "exec 3<>/dev/tcp/${TOPO_ADDR[0]}/9" 2>&1) in
      *refused*)
        ok=1
        break
        ;;
      esac
      sleep 0.1
    done
    [ $ok = 1 ] || {
      echo "topo_net: node $i cannot reach ${TOPO_ADDR[0]}" >&2
      return 1
    }
  done
}

topo_net_down() {
  local n
  for n in "${TOPO_NS[@]}" "$TOPO_BR_NS"; do
    [ -n "$n" ] && ip netns del "$n" 2>/dev/null
  done
  TOPO_NS=()
  TOPO_BR_NS=""
}

topo_net_counters() {
  local i s
  for i in "${!TOPO_NS[@]}"; do
    s=$(ip netns exec "${TOPO_NS[i]}" sh -c 'cd /sys/class/net/uplink/statistics &&
      echo $(cat tx_bytes) $(cat tx_packets) $(cat rx_bytes) $(cat rx_packets)') || return 1
    echo "$i $s"
  done
}

topo_net_drops() {
  local i total=0 d
  for i in "${!TOPO_NS[@]}"; do
    for d in $(ip netns exec "${TOPO_NS[i]}" tc -s qdisc show dev uplink |
      sed -n 's/.*dropped \([0-9]*\).*/\1/p') $(ip netns exec "$TOPO_BR_NS" tc -s qdisc show \
      dev "tp$i" | sed -n 's/.*dropped \([0-9]*\).*/\1/p'); do
      total=$((total + d))
    done
  done
  echo "$total"
}
