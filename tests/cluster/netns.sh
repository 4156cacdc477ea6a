#!/usr/bin/env bash
# netns.sh BUILD_DIR: two "hosts" made of network namespaces joined by a veth pair
# (10.99.0.1 and 10.99.0.2, addresses that exist only inside the namespaces this test makes),
# one `collrun --nnodes 2 --node-rank K` in each: the bench and a short training run across
# them. Checks results, that ranks in one namespace use shm and across namespaces tcp over
# the veth addresses. Prints "cluster: N passed, N failed"; skips cleanly without root.
set -u
build=$(cd "${1:?usage: netns.sh BUILD_DIR}" && pwd)
here=$(cd "$(dirname "$0")" && pwd)
bench=$build/bench/allreduce_bench
train=$build/tools/train
collrun=$build/tools/collrun
data=/usr/share/datasets/fashion-mnist

# skip, pass, fail, fails_clearly, finish
. "$here/report.sh"
[ "$(id -u)" = 0 ] || skip "needs root to make network namespaces"
command -v ip >/dev/null || skip "no ip command (iproute2)"
[ -x "$bench" ] && [ -x "$collrun" ] || skip "build $bench and $collrun first"

# Names unique to this run, so that parallel runs (other build directories) never meet.
tag=$$
ns=("collh1-$tag" "collh2-$tag")
addr=(10.99.0.1 10.99.0.2)
work=$(mktemp -d /var/tmp/coll-netns.XXXXXX)
cleanup() {
  for n in "${ns[@]}"; do ip netns del "$n" 2>/dev/null; done
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

if ! ip netns add "${ns[0]}" 2>"$work/err"; then
  skip "cannot make network namespaces: $(cat "$work/err")"
fi
ip netns add "${ns[1]}" &&
  ip link add "cv1-$tag" netns "${ns[0]}" type veth peer name "cv2-$tag" netns "${ns[1]}" &&
  ip -n "${ns[0]}" addr add "${addr[0]}/24" dev "cv1-$tag" &&
  ip -n "${ns[1]}" addr add "${addr[1]}/24" dev "cv2-$tag" &&
  for i in 0 1; do
    ip -n "${ns[$i]}" link set lo up && ip -n "${ns[$i]}" link set "cv$((i + 1))-$tag" up || exit 1
  done
if [ $? != 0 ]; then
  echo "cluster: 0 passed, 1 failed (setting up the namespaces)"
  exit 1
fi
# The link is up when one namespace reaches the other (ping may be missing: try TCP too).
for _ in $(seq 50); do
  if ip netns exec "${ns[1]}" bash -c "exec 3<>/dev/tcp/${addr[0]}/9" 2>&1 | grep -q refused; then
    break
  fi
  sleep 0.1
done
cd "$work" || exit 1

# two_hosts NAME PORT PROG ARGS...: collrun -n 2 in each namespace, node 0 hosting the
# store at 10.99.0.1:PORT; output in NAME.0.log and NAME.1.log; returns the worse exit code.
two_hosts() {
  local name=$1 port=$2
  shift 2
  local pids=() k
  for k in 0 1; do
    ip netns exec "${ns[$k]}" env -u MASTER_ADDR -u MASTER_PORT -u COLL_HOST_ID \
      COLL_DEBUG=INFO timeout 150 "$collrun" -n 2 --nnodes 2 --node-rank $k \
      --master-addr "${addr[0]}" --master-port "$port" --token "netns-$tag" --timeout 120 \
      "$@" >"$name.$k.log" 2>&1 &
    pids+=($!)
  done
  local rc=0 r
  for k in 0 1; do
    wait "${pids[$k]}"
    r=$?
    [ $r -gt $rc ] && rc=$r
  done
  cat "$name.0.log" "$name.1.log" >"$name.log"
  return $rc
}

# across NAME: every pair used the right transport, tcp over the veth addresses only.
across_ok() {
  local name=$1
  if ! bash "$here/check_transports.sh" "$name.log" 4; then return 1; fi
  if grep "tcp: listening on" "$name.log" | grep -qv "10\.99\.0\.[12]:"; then
    echo "  a rank published a tcp address outside the namespaces' veth:"
    grep "tcp: listening on" "$name.log"
    return 1
  fi
  return 0
}

two_hosts bench 29411 "$bench" -c 1 -b 64K -e 4M -f 4 -n 3 -w 1
rc=$?
if [ $rc = 0 ] && grep -q "Out of bounds values : 0 OK" bench.0.log && across_ok bench; then
  pass "bench across two network namespaces (collrun --nnodes 2)"
else
  fail "bench across two network namespaces (exit $rc)" bench.0.log bench.1.log
fi

if [ -x "$train" ] && [ -d "$data" ]; then
  two_hosts train 29412 "$train" --max-steps 30 --epochs 1 --no-eval --log-every 10 \
    --data "$data"
  rc=$?
  if [ $rc = 0 ] && grep -q "done: 30 steps on 4 ranks" train.0.log && across_ok train; then
    pass "training across two network namespaces"
  else
    fail "training across two network namespaces (exit $rc)" train.0.log train.1.log
  fi
else
  echo "SKIP training: no $train or no data set at $data"
fi

# A store address that leads nowhere fails within COLL_TIMEOUT_MS, naming the address.
ip netns exec "${ns[1]}" env RANK=1 WORLD_SIZE=2 MASTER_ADDR=10.99.0.77 MASTER_PORT=29413 \
  COLL_TIMEOUT_MS=3000 timeout 60 "$bench" -b 1K -e 1K >unreachable.log 2>&1
fails_clearly "an unreachable store is reported" $? unreachable.log "10.99.0.77"

finish
