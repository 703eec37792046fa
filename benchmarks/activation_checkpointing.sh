#!/bin/bash
# Activation checkpointing, side by side in one run: `noeira train --model gpt-small` with and
# without --checkpoint-activations (nn/checkpointed.hpp), and the same GPT in PyTorch with and
# without torch.utils.checkpoint on every block (benchmarks/pytorch_gpt.py). Per run: the step
# time (mean and median over the measured steps), the peak resident memory of the process
# (/usr/bin/time), and for noeira the activation bytes of the first step (--report-memory); then
# what recomputation costs each framework (checkpointed / plain step time) and what it saves, and
# beside them the machine's sgemm rate, which says how fast this machine computes.
#
#   benchmarks/activation_checkpointing.sh [build-dir] [steps] [model]
#                                           (defaults: build 4 gpt-small)
#   environment: WARMUP=1 steps before the measured ones, BATCH=32, THREADS=2,
#                DATA=/usr/share/games/fortunes
#
# The figures are only as good as the machine is quiet. Exits non-zero when a run fails or
# noeira's two runs end at different losses (checkpointing must change no bit).
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
build=${1:-$here/../build}
steps=${2:-4}
model=${3:-gpt-small}
warmup=${WARMUP:-1}
batch=${BATCH:-32}
threads=${THREADS:-2}
data=${DATA:-/usr/share/games/fortunes}
python=/usr/bin/python3

source "$here/text_bench_setup.sh" activation_checkpointing /usr/bin/time
export OMP_NUM_THREADS=$threads OPENBLAS_NUM_THREADS=$threads

echo "== $(uptime); $(nproc) cores"
echo "== sgemm rate (OpenBLAS, $threads threads)"
"$bench" --benchmark_filter='BM_Sgemm1024' --benchmark_format=json --benchmark_min_time=0.5 \
  --benchmark_repetitions=3 > "$work/sgemm.json"
for mode in plain checkpointed; do
  flags=()
  [[ $mode == checkpointed ]] && flags=(--checkpoint-activations)
  echo "== noeira train --model $model ${flags[*]} ($warmup + $steps steps, batch $batch)"
  /usr/bin/time -f %M -o "$work/noeira-$mode.rss" "$noeira" train --data text "${data_flag[@]}" \
    --model "$model" "${flags[@]}" --batch "$batch" --steps "$total" --eval-every "$total" \
    --eval-batches 1 --log-every 1 --threads "$threads" --report-memory \
    --out "$work/noeira-$mode" > "$work/noeira-$mode.out"
  echo "== PyTorch ${flags[*]}"
  /usr/bin/time -f %M -o "$work/torch-$mode.rss" "$python" "$here/pytorch_gpt.py" train \
    --data "$data" --model "$model" "${flags[@]}" --batch "$batch" --steps "$total" \
    --time-from "$warmup" --threads "$threads" > "$work/torch-$mode.out"
done

"$python" - "$work" "$warmup" "$threads" "$here" <<'PY'
import json, re, statistics, sys
work, warmup, threads = sys.argv[1], int(sys.argv[2]), sys.argv[3]
sys.path.insert(0, sys.argv[4])
from noeira_runs import sgemm_rate, step_times
sgemm = sgemm_rate(f"{work}/sgemm.json")
print(f"\nsgemm 1024^3 at {threads} threads: {sgemm:.1f} GFLOP/s (best of 3)")

def rss_mib(run):
    return int(open(f"{work}/{run}.rss").read().split()[-1]) / 1024

def noeira(mode):
    times, losses = step_times(f"{work}/noeira-{mode}", warmup)
    m = re.search(r"activations ([0-9.]+) MiB", open(f"{work}/noeira-{mode}.out").read())
    return times, losses, float(m.group(1)) if m else float("nan")

def torch(mode):
    return json.loads(open(f"{work}/torch-{mode}.out").read().strip().splitlines()[-1])["step_times"]

ours = {mode: noeira(mode) for mode in ("plain", "checkpointed")}
theirs = {mode: torch(mode) for mode in ("plain", "checkpointed")}
print(f"\n{'run':34s} {'ms/step mean':>12s} {'median':>8s} {'peak RSS':>10s}  activations")
for mode in ("plain", "checkpointed"):
    times, _, act = ours[mode]
    print(f"{'noeira ' + mode:34s} {1e3 * statistics.mean(times):12.1f} "
          f"{1e3 * statistics.median(times):8.1f} {rss_mib('noeira-' + mode):7.0f} MiB  "
          f"{act:.1f} MiB (first step)")
for mode in ("plain", "checkpointed"):
    t = theirs[mode]
    print(f"{'pytorch ' + mode:34s} {1e3 * statistics.mean(t):12.1f} "
          f"{1e3 * statistics.median(t):8.1f} {rss_mib('torch-' + mode):7.0f} MiB")
for name, plain, ckpt, rss in (
        ("noeira", ours["plain"][0], ours["checkpointed"][0], "noeira"),
        ("pytorch", theirs["plain"], theirs["checkpointed"], "torch")):
    print(f"{name}: checkpointed / plain step time {statistics.mean(ckpt) / statistics.mean(plain):.3f}x, "
          f"peak RSS {rss_mib(rss + '-checkpointed') / rss_mib(rss + '-plain'):.3f}x")
print(f"checkpointed steps, pytorch / noeira time: "
      f"{statistics.mean(theirs['checkpointed']) / statistics.mean(ours['checkpointed'][0]):.2f}x")
if ours["plain"][1] != ours["checkpointed"][1]:
    sys.exit("activation_checkpointing: --checkpoint-activations changed noeira's losses")
PY
