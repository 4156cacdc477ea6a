#!/bin/sh
# tools/train from the command line: --help documents every flag, bad flags are usage
# errors (exit 2), a missing data folder is a clear error (exit 1), and a short run
# under collrun (2 ranks: environment rendezvous, --check-sync, checkpoint, resume)
# succeeds. Needs the Fashion-MNIST package for the run; exit 77 (skip) without it.
set -u
train=$1
collrun=$2
data=/usr/share/datasets/fashion-mnist
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

"$train" --help >"$tmp/help" || fail "--help exited $?"
for flag in epochs batch lr lr-schedule momentum weight-decay optimizer seed hidden data \
            drop-last no-shuffle bucket-mb accumulate check-sync checkpoint \
            checkpoint-every resume device blas-threads max-steps warmup-steps log-every no-eval \
            quiet elastic shards bit-identical sample-log elastic-timeout-ms; do
  grep -q -- "--$flag" "$tmp/help" || fail "--help does not document --$flag"
done
"$train" --optimizer sgdx 2>"$tmp/err"; [ $? -eq 2 ] || fail "bad --optimizer not exit 2"
grep -q "expected sgd or adam" "$tmp/err" || fail "bad --optimizer message: $(cat "$tmp/err")"
"$train" --hidden 256,x 2>/dev/null; [ $? -eq 2 ] || fail "bad --hidden not exit 2"
"$train" --warmup-steps -1 2>/dev/null; [ $? -eq 2 ] || fail "negative --warmup-steps not exit 2"
"$train" stray 2>/dev/null; [ $? -eq 2 ] || fail "stray argument not exit 2"
# --elastic needs a launcher's store that outlives the ranks (collrun's).
"$train" --elastic --data "$tmp" 2>"$tmp/err"; [ $? -eq 1 ] || fail "--elastic alone not exit 1"
grep -q "needs a rendezvous store that outlives the ranks" "$tmp/err" ||
  fail "--elastic alone message: $(cat "$tmp/err")"
"$train" --bit-identical 2>/dev/null; [ $? -eq 2 ] || fail "--bit-identical alone not exit 2"
"$train" --data "$tmp" 2>"$tmp/err"; [ $? -eq 1 ] || fail "missing data not exit 1"
grep -q "$tmp: no train-images-idx3-ubyte" "$tmp/err" || fail "missing data message: $(cat "$tmp/err")"

[ -r "$data/train-images-idx3-ubyte.gz" ] || { echo "no $data: skipping the run"; exit 77; }
"$collrun" -n 2 "$train" --max-steps 20 --epochs 1 --no-eval --check-sync --bucket-mb 0.3 \
  --checkpoint "$tmp/ck" --checkpoint-every 7 >"$tmp/out" 2>&1 || fail "2-rank run: $(cat "$tmp/out")"
grep -q "done: 20 steps on 2 ranks" "$tmp/out" || fail "no summary: $(cat "$tmp/out")"
grep -Eq "step time on rank 0: [0-9.]+ ms = data [0-9.]+, forward [0-9.]+, backward [0-9.]+, comm wait [0-9.]+, optimizer [0-9.]+; CPU [0-9.]+ ms per step" \
  "$tmp/out" || fail "no step time breakdown: $(cat "$tmp/out")"
[ -s "$tmp/ck" ] && [ ! -e "$tmp/ck.tmp" ] || fail "checkpoint not written atomically"
# The warm-up leaves the first steps out of the figures, and says so; a run that ends
# within it counts every step, and says that.
"$collrun" -n 2 "$train" --max-steps 12 --warmup-steps 4 --epochs 1 --no-eval \
  >"$tmp/out" 2>&1 || fail "warm-up run: $(cat "$tmp/out")"
grep -q "done: 12 steps on 2 ranks, [0-9]* samples/s, .* of step time (after the warm-up)" \
  "$tmp/out" || fail "warm-up summary: $(cat "$tmp/out")"
"$collrun" -n 1 "$train" --max-steps 3 --warmup-steps 5 --epochs 1 --no-eval >"$tmp/out" 2>&1 ||
  fail "short warm-up run: $(cat "$tmp/out")"
grep -q "done: 3 steps on 1 rank, [1-9][0-9]* samples/s, .*(warm-up included: no step came after it)" \
  "$tmp/out" || fail "short warm-up summary: $(cat "$tmp/out")"
"$collrun" -n 2 "$train" --max-steps 30 --epochs 1 --no-eval --checkpoint "$tmp/ck" --resume \
  >"$tmp/out" 2>&1 || fail "resume: $(cat "$tmp/out")"
grep -q "resumed from $tmp/ck: epoch 1, step 20" "$tmp/out" || fail "resume: $(cat "$tmp/out")"
grep -q "done: 30 steps" "$tmp/out" || fail "resumed run: $(cat "$tmp/out")"
echo "ok"
