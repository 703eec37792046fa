#!/bin/bash
# What bf16 mixed precision's parameter copies buy each policy, side by side in one run:
# `mpirun -np N noeira train --policy P` on a GPT with --precision fp32 and bf16 (the units
# compute with a bf16 copy of the parameters, the fp32 masters are sliced like the optimizer
# state: distributed/param_store.hpp). Per policy and precision: the step time (mean and median
# over the measured steps), the time the ranks waited on ZeRO-3's parameter gathers per step (the
# mean over ranks and over every step, warm-up included), and rank 0's bytes from
# --report-memory (parameters, gradients, optimizer state with the masters, their total, and the
# transient buffers outside it);
# then bf16 / fp32 for each. Beside them the machine's sgemm rate at one thread
# (benchmarks/bench_sgemm.cpp), which says how fast this machine computes.
#
#   benchmarks/mixed_policies.sh [build-dir] [steps] [model]   (defaults: build 15 gpt-char)
#   environment: WARMUP=3 steps before the measured ones, BATCH=16, RANKS=2,
#                POLICIES="ddp zero1 zero2 zero3", DATA=/usr/share/games/fortunes,
#                FLAGS (more train flags for every run, e.g. --no-zero3-prefetch to expose the
#                gathers), MPIRUN_ARGS goes to mpirun as is,
#                COMPARE=precision (fp32 against bf16 parameters and products) or grads (fp32
#                against bf16 gradients, both runs with --precision bf16 --reduce-dtype bf16)
#
# The bf16 runs also round the matrix products' operands (that is what --precision bf16 means),
# so their step time includes the bf16 products' gain or cost on this CPU; the memory and the
# gather waits are the parameter copies' alone. Exits non-zero when a run fails.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
build=${1:-$here/../build}
steps=${2:-15}
model=${3:-gpt-char}
warmup=${WARMUP:-3}
batch=${BATCH:-16}
np=${RANKS:-2}
policies=${POLICIES:-ddp zero1 zero2 zero3}
data=${DATA:-/usr/share/games/fortunes}
python=/usr/bin/python3

source "$here/text_bench_setup.sh" mixed_policies
source "$here/mpi_bench_setup.sh" mixed_policies
compare=${COMPARE:-precision}
for policy in $policies; do
  for dtype in fp32 bf16; do
    case $compare in
      precision) variant="--precision $dtype" ;;
      grads) variant="--precision bf16 --reduce-dtype bf16 --grad-dtype $dtype" ;;
      *) echo "COMPARE=$compare: precision or grads" >&2; exit 2 ;;
    esac
    echo "== mpirun -np $np noeira train --model $model --policy $policy $variant ${FLAGS:-}" \
         "($warmup + $steps steps, batch $batch)"
    mpirun -np "$np" ${MPIRUN_ARGS:-} "$noeira" train --data text "${data_flag[@]}" \
      --model "$model" --policy "$policy" $variant --batch "$batch" \
      --steps "$total" --eval-every "$total" --eval-batches 1 --log-every 1 --threads 1 \
      --report-memory ${FLAGS:-} --out "$work/$policy-$dtype" > "$work/$policy-$dtype.out"
  done
done

PYTHONPATH="$here" "$python" - "$work" "$warmup" "$total" "$np" "$policies" "$compare" <<'PY'
import json, re, statistics, sys
from noeira_runs import sgemm_rate, step_times
work, warmup, total = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
np, policies, compare = int(sys.argv[4]), sys.argv[5].split(), sys.argv[6]
sgemm = sgemm_rate(f"{work}/sgemm.json")
print(f"\nsgemm 1024^3 at 1 thread: {sgemm:.1f} GFLOP/s (best of 3); {np} MPI ranks x 1 thread")
kinds = ("params", "grads", "optimizer", "total", "transient")

def figures(run):
    times, _ = step_times(f"{work}/{run}", warmup)
    records = [json.loads(l) for l in open(f"{work}/{run}/metrics.jsonl")]
    period = [r for r in records if r["type"] != "step"][-1]
    wait = period.get("gather_wait_s")
    # Over every step, warm-up included: the records keep one total.
    wait = wait / total if isinstance(wait, (int, float)) else float("nan")
    line = next(l for l in open(f"{work}/{run}.out") if l.startswith("[rank 0] memory:"))
    mib = {k: float(re.search(k + r" ([0-9.]+) MiB", line).group(1)) for k in kinds}
    return statistics.mean(times), statistics.median(times), wait, mib

print(f"\n{'policy':7s} {compare:9s} {'ms/step':>8s} {'median':>8s} {'gather wait':>12s}  "
      + "  ".join(f"{k + ' MiB':>13s}" for k in kinds))
for policy in policies:
    row = {p: figures(f"{policy}-{p}") for p in ("fp32", "bf16")}
    for p in ("fp32", "bf16"):
        mean, median, wait, mib = row[p]
        print(f"{policy:7s} {p:9s} {1e3 * mean:8.1f} {1e3 * median:8.1f} {1e3 * wait:9.2f} ms  "
              + "  ".join(f"{mib[k]:13.3f}" for k in kinds))
    (f_mean, _, f_wait, f_mib), (b_mean, _, b_wait, b_mib) = row["fp32"], row["bf16"]
    waits = f"{b_wait / f_wait:.2f}x" if f_wait == f_wait and f_wait > 0 else "-"
    print(f"{policy:7s} bf16/fp32 {b_mean / f_mean:8.3f}x {'':8s} {waits:>12s}  "
          + "  ".join(f"{b_mib[k] / f_mib[k]:12.3f}x" for k in kinds))
PY
