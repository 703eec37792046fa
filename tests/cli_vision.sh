#!/bin/sh
# A CNN with BatchNorm through the binary, on Fashion-MNIST (a few hundred samples):
#  - `mpiexec -n 2 noeira train --model cnn --policy zero2` saves the same parameters and buffers
#    (running statistics), bit for bit, as `--sim-ranks 2` (h5diff without a tolerance);
#  - model.h5 holds the buffers, and `noeira eval` of it gives the last epoch's test accuracy and
#    loss (the running statistics are loaded, not the initial ones);
#  - a run resumed from its mid-epoch checkpoint ends on the bits of the uninterrupted run, and
#    the checkpoint resumes on 3 ranks under ZeRO-3 too; eval of the checkpoint equals eval of
#    model.h5 at the same step;
#  - `--batchnorm local` trains another model (each rank's own statistics).
# Usage: cli_vision.sh MPIEXEC NUMPROC_FLAG NOEIRA H5DIFF H5LS WORKDIR. Exit 77: skipped.
set -e
mpiexec=$1 flag=$2 noeira=$3 h5diff=$4 h5ls=$5 work=$6
. "$(dirname "$0")/fashion_mnist_work.sh"
common="train --model cnn --limit-train 300 --limit-test 100 --epochs 2 --batch 50 --threads 1
        --log-every 2 --watchdog-timeout 60 --log-format json"
"$mpiexec" "$flag" 2 "$noeira" $common --policy zero2 --out "$work/mpi" </dev/null >"$work/mpi.log"
"$noeira" $common --policy zero2 --sim-ranks 2 --out "$work/sim" </dev/null >"$work/sim.log"
"$h5diff" "$work/mpi/model.h5" "$work/sim/model.h5"
echo "mpi and simulated parameters and buffers identical"

"$h5ls" -r "$work/sim/model.h5" | grep -q "^/buffers/0.1.running_var " ||
  { echo "FAIL: model.h5 holds no buffers/0.1.running_var"; "$h5ls" -r "$work/sim/model.h5"; exit 1; }
field() { sed "s/.*\"$1\":\([^,}]*\).*/\1/"; }
last=$(grep '"type":"epoch"' "$work/sim.log" | tail -1)
eval_out=$("$noeira" eval --config "$work/sim/config.json" --params "$work/sim/model.h5" \
  --log-format json </dev/null)
want=$(echo "$last" | field test_accuracy)
got=$(echo "$eval_out" | field test_accuracy)
[ "$got" = "$want" ] || { echo "FAIL: eval gives test_accuracy $got, the last epoch $want"; exit 1; }
# The loss sums of 2 ranks and of 1 add in another order: equal to 1e-6.
want=$(echo "$last" | field test_loss)
got=$(echo "$eval_out" | field test_loss)
awk -v a="$got" -v b="$want" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(d <= 1e-6 * b) }' ||
  { echo "FAIL: eval gives test_loss $got, the last epoch $want"; exit 1; }
echo "eval of model.h5 reproduces the last epoch's test accuracy and loss"

"$noeira" $common --policy zero2 --sim-ranks 2 --checkpoint-dir "$work/ckpt" --checkpoint-every 4 \
  --keep-last 0 --out "$work/ckpt-run" </dev/null >/dev/null
"$noeira" $common --policy zero2 --sim-ranks 2 --resume "$work/ckpt/step-00000004" --out "$work/resumed" \
  </dev/null >/dev/null
"$h5diff" "$work/sim/model.h5" "$work/resumed/model.h5"
echo "resume from a mid-epoch checkpoint identical, buffers included"
"$noeira" $common --sim-ranks 3 --policy zero3 --resume "$work/ckpt/step-00000004" \
  --out "$work/resharded" </dev/null >/dev/null
echo "resumed on 3 ranks under zero3"
from_ckpt=$("$noeira" eval --config "$work/sim/config.json" --checkpoint "$work/ckpt/latest" \
  --log-format json </dev/null | field test_accuracy)
[ "$from_ckpt" = "$(echo "$eval_out" | field test_accuracy)" ] ||
  { echo "FAIL: eval of the last checkpoint gives $from_ckpt"; exit 1; }
echo "eval of the checkpoint equals eval of model.h5"

"$noeira" $common --policy zero2 --sim-ranks 2 --batchnorm local --out "$work/local" </dev/null >/dev/null
if "$h5diff" -q "$work/sim/model.h5" "$work/local/model.h5" >/dev/null; then
  echo "FAIL: --batchnorm local trained the same model as sync"; exit 1
fi
echo "--batchnorm local trains with each rank's statistics"
