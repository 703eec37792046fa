#!/bin/sh
# A language model (gpt-tiny, lstm-tiny, ...) through the binary, on the default corpus (Debian's
# fortunes):
#  - `mpiexec -n 2 noeira train --data text --policy zero3` saves the same parameters, bit for bit,
#    as `--sim-ranks 2` (h5diff without a tolerance compares exactly);
#  - a run resumed from its step-7 checkpoint (inside the first evaluation period) ends on the
#    bits of the uninterrupted run, and the checkpoint resumes on 3 ranks under another policy
#    too;
#  - `noeira eval` of the saved model gives the last evaluation record's validation loss (to
#    1e-7 of it: see there);
#  - `noeira generate` prints the same text for the same seed, other text for another.
# Usage: cli_language_model.sh MPIEXEC NUMPROC_FLAG NOEIRA H5DIFF WORKDIR MODEL. Exit 77: skipped.
set -e
mpiexec=$1 flag=$2 noeira=$3 h5diff=$4 work=$5 model=$6
if [ ! -d /usr/share/games/fortunes ]; then
  echo "skipped: the fortunes corpus is not installed (apt-get install fortunes)"
  exit 77
fi
rm -rf "$work"
mkdir -p "$work"
common="train --data text --model $model --steps 20 --eval-every 10 --eval-batches 2 --batch 6
        --threads 1 --log-every 5 --watchdog-timeout 60 --log-format json"
"$mpiexec" "$flag" 2 "$noeira" $common --policy zero3 --out "$work/mpi" </dev/null >"$work/mpi.log"
"$noeira" $common --policy zero3 --sim-ranks 2 --out "$work/sim" </dev/null >"$work/sim.log"
"$h5diff" "$work/mpi/model.h5" "$work/sim/model.h5"
echo "mpi and simulated parameters identical"
case $model in gpt*)
  "$mpiexec" "$flag" 2 "$noeira" $common --policy zero3 --checkpoint-activations \
    --out "$work/mpi-recomputed" </dev/null >/dev/null
  "$h5diff" "$work/mpi-recomputed/model.h5" "$work/sim/model.h5"
  echo "mpi with --checkpoint-activations identical to the simulated run without"
  ;;
esac

"$noeira" $common --policy zero3 --sim-ranks 2 --checkpoint-dir "$work/ckpt" --checkpoint-every 7 \
  --keep-last 0 \
  --out "$work/ckpt-run" </dev/null >/dev/null
"$noeira" $common --policy zero3 --sim-ranks 2 --resume "$work/ckpt/step-00000007" --out "$work/resumed" \
  </dev/null >/dev/null
"$h5diff" "$work/sim/model.h5" "$work/resumed/model.h5"
echo "resume identical"
"$noeira" $common --sim-ranks 3 --policy zero1 --resume "$work/ckpt/step-00000007" \
  --out "$work/resharded" </dev/null >/dev/null
echo "resumed on 3 ranks under zero1"

. "$(dirname "$0")/lm_eval_check.sh"
expect_eval_reproduces_last "$noeira" "$work/sim" "$work/sim.log"

g="generate --params $work/sim/model.h5 --prompt The --tokens 40"
a=$("$noeira" $g --seed 4 </dev/null)
b=$("$noeira" $g --seed 4 </dev/null)
c=$("$noeira" $g --seed 5 </dev/null)
[ "$a" = "$b" ] || { echo "FAIL: the same seed gave two texts"; exit 1; }
[ "$a" != "$c" ] || { echo "FAIL: another seed gave the same text"; exit 1; }
case $a in The*) ;; *) echo "FAIL: the text does not start with the prompt: $a"; exit 1 ;; esac
echo "generate is deterministic"
