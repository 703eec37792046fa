#!/bin/sh
# Ranks started with other options or other data (mpirun's `-np 1 A : -np 1 B`): every case must
# end at start-up with one error naming what differs and the ranks, a non-zero exit, and no crash
# inside MPI. The options are checked before the data is read, so those cases take about a second.
# Usage: ranks_disagree.sh MPIEXEC NUMPROC_FLAG NOEIRA WORKDIR. Exit 77: skipped.
set -e
mpiexec=$1 flag=$2 noeira=$3 work=$4
. "$(dirname "$0")/fashion_mnist_work.sh"
common="train --epochs 1 --limit-train 200 --limit-test 100 --threads 1 --log-every 0"
failures=0

# expect NAME FRAGMENT -- RANK0_ARGS -- RANK1_ARGS: the job fails with FRAGMENT in a noeira error.
expect() {
  name=$1 fragment=$2
  shift 2
  log="$work/$name.log"
  set +e
  timeout 60 "$mpiexec" "$flag" 1 "$@" >"$log" 2>&1
  rc=$?
  set -e
  if [ "$rc" -eq 0 ] || [ "$rc" -ge 124 ]; then
    echo "FAIL $name: exit code $rc (want a plain failure)"; failures=$((failures + 1))
  elif ! grep -q "^noeira: error: .*$fragment" "$log"; then
    echo "FAIL $name: no error line with: $fragment"; sed 's/^/  | /' "$log" | head -20
    failures=$((failures + 1))
  elif grep -q "Segmentation\|Aborted (6)\|NBC_Progress\|MPI_ERR\|double free" "$log"; then
    echo "FAIL $name: a crash or a raw MPI error"; failures=$((failures + 1))
  else
    echo "ok   $name: $(grep -m1 '^noeira: error:' "$log")"
  fi
}

o0="--out $work/r0" o1="--out $work/r1"
expect checkpoint-dir \
  "ranks disagree on --checkpoint-dir: rank 0 has '', rank 1 has '$work/ck'" \
  "$noeira" $common $o0 : "$flag" 1 "$noeira" $common $o1 --checkpoint-dir "$work/ck"
expect policy "ranks disagree on --policy: rank 0 has 'ddp', rank 1 has 'zero3'" \
  "$noeira" $common $o0 : "$flag" 1 "$noeira" $common $o1 --policy zero3
expect model "ranks disagree on --model: rank 0 has 'mlp', rank 1 has 'linear'" \
  "$noeira" $common $o0 : "$flag" 1 "$noeira" $common $o1 --model linear
expect batch "ranks disagree on --batch: rank 0 has '100', rank 1 has '50'" \
  "$noeira" $common $o0 : "$flag" 1 "$noeira" $common $o1 --batch 50
expect seed "ranks disagree on --seed: rank 0 has '1', rank 1 has '5'" \
  "$noeira" $common $o0 : "$flag" 1 "$noeira" $common $o1 --seed 5
expect lr "ranks disagree on --lr: rank 0 has '0.001', rank 1 has '0.002'" \
  "$noeira" $common $o0 : "$flag" 1 "$noeira" $common $o1 --lr 2e-3

# The same options, other files: a relative --data-dir read from each rank's own directory (as
# another node's disk would be), one holding the test split in place of the training split.
mkdir -p "$work/a" "$work/b"
for f in train-images-idx3-ubyte.gz train-labels-idx1-ubyte.gz t10k-images-idx3-ubyte.gz \
         t10k-labels-idx1-ubyte.gz; do
  ln -s "$data/$f" "$work/a/$f"
done
ln -s "$data/t10k-images-idx3-ubyte.gz" "$work/b/train-images-idx3-ubyte.gz"
ln -s "$data/t10k-labels-idx1-ubyte.gz" "$work/b/train-labels-idx1-ubyte.gz"
ln -s "$data/t10k-images-idx3-ubyte.gz" "$work/b/t10k-images-idx3-ubyte.gz"
ln -s "$data/t10k-labels-idx1-ubyte.gz" "$work/b/t10k-labels-idx1-ubyte.gz"
expect data "ranks disagree on the data: rank 0 has 'hash " \
  -wdir "$work/a" "$noeira" $common --data-dir . --out "$work/r" : \
  "$flag" 1 -wdir "$work/b" "$noeira" $common --data-dir . --out "$work/r"

[ "$failures" -eq 0 ] || { echo "$failures case(s) failed"; exit 1; }
echo "every disagreement named"
