#!/bin/bash
# ZeRO-3 with and without prefetch, side by side in one run: `mpirun -np N noeira train --policy
# zero3` on a GPT at N = 2 and 4 ranks (1 thread each), with the default prefetch (the next
# unit's gather in flight while the current unit computes, distributed/unit_gatherer.hpp) and
# with --no-zero3-prefetch (each gather when its unit starts). Per configuration: the step time
# (mean and median over the measured steps, from the step records' elapsed_s) and the time the
# ranks waited on parameter gathers per step (the epoch record's gather_wait_s, the mean over
# ranks, over warmup and measured steps alike), and beside them the machine's sgemm rate at one
# thread (benchmarks/bench_sgemm.cpp), which says how fast this machine computes.
#
#   benchmarks/zero3_prefetch.sh [build-dir] [steps] [model]   (defaults: build 20 gpt-char)
#   environment: WARMUP=3 steps before the measured ones, BATCH=16, RANKS="2 4",
#                DATA=/usr/share/games/fortunes, REPEAT=1 rounds (each runs both, in turn first,
#                so that a slow spell of a shared machine falls on both; the best round counts),
#                MPIRUN_ARGS goes to mpirun as is
#
# More ranks than cores oversubscribes them (4 ranks on a 2-core machine): the figure then shows
# what waiting costs when ranks share cores, not what a node with a core per rank would see.
# Exits non-zero when a run fails or the two runs of a configuration end at different losses
# (prefetch must change no bit).
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
build=${1:-$here/../build}
steps=${2:-20}
model=${3:-gpt-char}
warmup=${WARMUP:-3}
batch=${BATCH:-16}
ranks=${RANKS:-2 4}
data=${DATA:-/usr/share/games/fortunes}
repeat=${REPEAT:-1}
python=/usr/bin/python3

source "$here/text_bench_setup.sh" zero3_prefetch
source "$here/mpi_bench_setup.sh" zero3_prefetch
for ((r = 1; r <= repeat; ++r)); do
  for np in $ranks; do
    modes=(prefetch plain)
    ((r % 2 == 0)) && modes=(plain prefetch)  # the order alternates between rounds
    for mode in "${modes[@]}"; do
      flags=()
      [[ $mode == plain ]] && flags=(--no-zero3-prefetch)
      echo "== round $r: mpirun -np $np noeira train --model $model --policy zero3 ${flags[*]}" \
           "($warmup + $steps steps, batch $batch)"
      mpirun -np "$np" ${MPIRUN_ARGS:-} "$noeira" train --data text "${data_flag[@]}" \
        --model "$model" --policy zero3 "${flags[@]}" --batch "$batch" --steps "$total" \
        --eval-every "$total" --eval-batches 1 --log-every 1 --threads 1 \
        --out "$work/$mode-np$np-r$r" > "$work/$mode-np$np-r$r.out"
    done
  done
done

PYTHONPATH="$here" "$python" - "$work" "$warmup" "$total" "$repeat" "$ranks" <<'PY'
import json, statistics, sys
from noeira_runs import sgemm_rate
work, warmup, total, repeat = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
ranks = [int(n) for n in sys.argv[5].split()]
sgemm = sgemm_rate(f"{work}/sgemm.json")
print(f"\nsgemm 1024^3 at 1 thread: {sgemm:.1f} GFLOP/s (best of 3)")
failures = []

def figures(run):
    records = [json.loads(l) for l in open(f"{work}/{run}/metrics.jsonl")]
    elapsed = {x["step"]: x["elapsed_s"] for x in records if x["type"] == "step"}
    elapsed.setdefault(0, 0.0)
    times = [elapsed[s] - elapsed[s - 1] for s in range(warmup + 1, total + 1)]
    period = [x for x in records if x["type"] not in ("step",)][-1]
    losses = [x["loss"] for x in records if x["type"] == "step"]
    return statistics.mean(times), statistics.median(times), period["gather_wait_s"] / total, losses

for np in ranks:
    print(f"\nZeRO-3, {np} MPI ranks x 1 thread:")
    best = {}
    for mode in ("prefetch", "plain"):
        rows = [figures(f"{mode}-np{np}-r{r}") for r in range(1, repeat + 1)]
        best[mode] = min(rows, key=lambda f: f[0])
    if best["prefetch"][3] != best["plain"][3]:
        failures.append(f"{np} ranks: prefetch changed the losses")
    for mode, label in (("prefetch", "prefetch (default)"), ("plain", "--no-zero3-prefetch")):
        mean, median, wait, _ = best[mode]
        print(f"  {label:20s} {1e3 * mean:8.1f} ms/step mean (median {1e3 * median:.1f})  "
              f"waiting on gathers {1e3 * wait:7.2f} ms/step ({wait / mean:5.1%} of the step)")
    print(f"  prefetch / no prefetch step time: {best['prefetch'][0] / best['plain'][0]:.3f}x "
          f"(best round of {repeat} by the mean); waits {best['prefetch'][2] / max(best['plain'][2], 1e-12):.2f}x")
if failures:
    sys.exit("zero3_prefetch: " + "; ".join(failures))
PY
