#!/usr/bin/env bash
# slurm.sh BUILD_DIR: real jobs on a local Slurm cluster of two emulated nodes
# (../shared/slurm-local): srun, sbatch and salloc+mpirun with no MASTER_ADDR/MASTER_PORT,
# checking results and that ranks of one node use shm and ranks of two nodes tcp.
# Prints "cluster: N passed, N failed"; exit 0 with "cluster: skipped: ..." when it cannot run.
set -u
build=$(cd "${1:?usage: slurm.sh BUILD_DIR}" && pwd)
here=$(cd "$(dirname "$0")" && pwd)
root=$(git -C "$here" rev-parse --show-toplevel 2>/dev/null || (cd "$here/../.." && pwd))
slurm_dir=$root/../shared/slurm-local
bench=$build/bench/allreduce_bench
train=$build/tools/train
data=/usr/share/datasets/fashion-mnist

# skip, pass, fail, fails_clearly, finish
. "$here/report.sh"
[ "$(id -u)" = 0 ] || skip "needs root to run slurmctld and slurmd"
[ -f "$slurm_dir/start-slurm.sh" ] || skip "no $slurm_dir/start-slurm.sh"
[ -x "$bench" ] || skip "build $bench first"
command -v flock >/dev/null || skip "no flock"

# One user of the cluster at a time (several build directories may run this test).
exec 9>/var/tmp/coll-cluster-slurm.lock
flock -w 900 9 || skip "another slurm.sh held the lock for 15 minutes"

export SLURM_CONF=/var/tmp/slurm-local/etc/slurm.conf
started=0
if ! timeout 5 scontrol ping >/dev/null 2>&1; then started=1; fi
work=$(mktemp -d /var/tmp/coll-slurm.XXXXXX)
cleanup() {
  if [ "$started" = 1 ]; then bash "$slurm_dir/stop-slurm.sh" >/dev/null 2>&1; fi
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
if ! timeout 180 bash "$slurm_dir/start-slurm.sh" >"$work/start.log" 2>&1; then
  tail -20 "$work/start.log"
  # Packages that cannot be installed (no network) make this a skip, not a failure.
  if grep -qiE "apt-get|unable to locate|could not resolve|temporary failure" "$work/start.log"; then
    skip "the local Slurm cluster did not start (packages missing?)"
  fi
  echo "cluster: 0 passed, 1 failed (start-slurm.sh)"
  exit 1
fi
cd "$work" || exit 1

# bench_ok NAME LOG NRANKS: the bench ended well, found no wrong values, and every pair
# used the transport its hosts call for.
bench_ok() {
  local name=$1 log=$2 n=$3 rc=$4
  if [ "$rc" != 0 ]; then fail "$name (exit $rc)" "$log"; return; fi
  if ! grep -q "Out of bounds values : 0 OK" "$log"; then fail "$name (no '0 OK')" "$log"; return; fi
  if ! bash "$here/check_transports.sh" "$log" "$n" >"$log.tp" 2>&1; then
    cat "$log.tp"
    fail "$name (transports)" "$log"
    return
  fi
  cat "$log.tp"
  pass "$name"
}

bench_args=(-c 1 -b 64K -e 4M -f 4 -n 3 -w 1)
unset MASTER_ADDR MASTER_PORT RANK WORLD_SIZE COLL_HOST_ID

# 1. srun across two nodes, 2 ranks each, host ids given per node (COLL_HOST_ID).
timeout 120 srun -N 2 -n 4 --ntasks-per-node=2 -l \
  bash -c 'COLL_HOST_ID=$SLURMD_NODENAME COLL_DEBUG=INFO exec "$@"' _ "$bench" "${bench_args[@]}" \
  >srun_hostid.log 2>&1
bench_ok "srun -N 2 -n 4 --ntasks-per-node=2, COLL_HOST_ID per node" srun_hostid.log 4 $?

# 2. srun, cyclic placement, default host id (tells emulated nodes apart by SLURMD_NODENAME).
timeout 120 srun -N 2 -n 4 -m cyclic -l env COLL_DEBUG=INFO "$bench" "${bench_args[@]}" \
  >srun_cyclic.log 2>&1
bench_ok "srun -N 2 -n 4 -m cyclic, default host id" srun_cyclic.log 4 $?

# 3. MASTER_PORT overrides the derived port (the log says which port the store used).
# Below the kernel's ephemeral range (32768+), where outgoing connections of earlier tests
# can hold a port, and outside the derived range (20000-31999); skip ports in use.
port=$((12000 + RANDOM % 8000))
while ss -Htan "( sport = :$port )" 2>/dev/null | grep -q .; do port=$((12000 + RANDOM % 8000)); done
MASTER_PORT=$port COLL_DEBUG=INFO timeout 120 srun -N 2 -n 4 --ntasks-per-node=2 -l \
  "$bench" -c 1 -b 1M -e 1M -n 2 -w 1 >srun_port.log 2>&1
rc=$?
if [ $rc = 0 ] && grep -q "store server listening on 0.0.0.0:$port" srun_port.log; then
  pass "srun with MASTER_PORT=$port"
else
  fail "srun with MASTER_PORT=$port (exit $rc)" srun_port.log
fi

# 4. Two steps of one job at once: different step ids, different ports.
cat >steps.sh <<EOF
#!/bin/bash
srun -N 2 -n 2 -l "$bench" -c 1 -b 1M -e 1M -n 3 -w 1 >step_a.log 2>&1 &
srun -N 2 -n 2 -l "$bench" -c 1 -b 1M -e 1M -n 3 -w 1 >step_b.log 2>&1 &
wait %1; a=\$?
wait %2; b=\$?
exit \$((a + b))
EOF
timeout 120 salloc -N 2 -n 4 --ntasks-per-node=2 bash steps.sh >steps.log 2>&1
rc=$?
if [ $rc = 0 ] && grep -q "0 OK" step_a.log && grep -q "0 OK" step_b.log; then
  pass "two concurrent srun steps in one allocation"
else
  cat step_a.log step_b.log >>steps.log 2>/dev/null
  fail "two concurrent srun steps in one allocation (exit $rc)" steps.log
fi

# 5. sbatch with srun inside.
cat >job.sbatch <<EOF
#!/bin/bash
#SBATCH -N 2
#SBATCH -n 4
#SBATCH --ntasks-per-node=2
#SBATCH -o $work/sbatch.out
srun -l env COLL_DEBUG=INFO "$bench" ${bench_args[*]}
EOF
timeout 150 sbatch --wait job.sbatch >sbatch.log 2>&1
rc=$?
cat sbatch.out >>sbatch.log 2>/dev/null
bench_ok "sbatch -N 2 -n 4 with srun inside" sbatch.log 4 $rc

# 6. Open MPI's mpirun inside a Slurm allocation (its daemons started by srun).
if command -v mpirun >/dev/null; then
  OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 timeout 120 \
    salloc -N 2 -n 4 --ntasks-per-node=2 mpirun -x COLL_DEBUG=INFO "$bench" "${bench_args[@]}" \
    >mpirun.log 2>&1
  bench_ok "salloc -N 2 -n 4 mpirun" mpirun.log 4 $?
  # One node: the store on loopback.
  OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 timeout 120 \
    salloc -N 1 -n 4 mpirun -x COLL_DEBUG=INFO "$bench" -c 1 -b 1M -e 1M -n 2 -w 1 \
    >mpirun1.log 2>&1
  rc=$?
  if [ $rc = 0 ] && grep -q "0 OK" mpirun1.log && grep -q "store host 127.0.0.1" mpirun1.log &&
    ! grep "INFO peer" mpirun1.log | grep -qv ": shm$"; then
    pass "salloc -N 1 -n 4 mpirun (loopback store, shm only)"
  else
    fail "salloc -N 1 -n 4 mpirun (exit $rc)" mpirun1.log
  fi
else
  echo "SKIP salloc mpirun: no mpirun"
fi

# 6b. One collrun per node started by srun (torchrun's pattern): RANK from collrun wins
# over SLURM_PROCID, the host id still tells the nodes apart.
collrun=$build/tools/collrun
if [ -x "$collrun" ]; then
  # Below the kernel's ephemeral range (32768+), where outgoing connections of earlier tests
# can hold a port, and outside the derived range (20000-31999); skip ports in use.
port=$((12000 + RANDOM % 8000))
while ss -Htan "( sport = :$port )" 2>/dev/null | grep -q .; do port=$((12000 + RANDOM % 8000)); done
  timeout 120 srun -N 2 -n 2 --ntasks-per-node=1 bash -c \
    'exec "$0" -n 2 --nnodes 2 --node-rank "$SLURM_NODEID" --master-addr node1 \
      --master-port '"$port"' "$@"' "$collrun" env COLL_DEBUG=INFO "$bench" "${bench_args[@]}" \
    >collrun.log 2>&1
  bench_ok "srun -N 2 --ntasks-per-node=1 collrun -n 2 --nnodes 2" collrun.log 4 $?
fi

# 7. Training across the nodes (Slurm's default block layout: 3 ranks + 1).
if [ -x "$train" ] && [ -d "$data" ]; then
  timeout 180 srun -N 2 -n 4 -l env COLL_DEBUG=INFO "$train" --max-steps 30 --epochs 1 \
    --no-eval --log-every 10 --data "$data" >train.log 2>&1
  rc=$?
  if [ $rc = 0 ] && grep -q "done: 30 steps on 4 ranks" train.log &&
    bash "$here/check_transports.sh" train.log 4; then
    pass "srun -N 2 -n 4 train --max-steps 30"
  else
    fail "srun -N 2 -n 4 train --max-steps 30 (exit $rc)" train.log
  fi
else
  echo "SKIP training: no $train or no data set at $data"
fi

# 8. A malformed node list is a clear error, not a hang.
timeout 60 srun -N 1 -n 2 env SLURM_STEP_NODELIST='node[1-' "$bench" -c 1 -b 1K -e 1K \
  >badlist.log 2>&1
fails_clearly "malformed SLURM_STEP_NODELIST is reported" $? badlist.log "malformed host list"

finish
