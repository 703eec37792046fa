#!/bin/bash
# Mixed precision, side by side in one run: `noeira train --model gpt-small` with
# --precision fp32 and bf16 (the matrix products' operands rounded to bfloat16, oneDNN's bf16
# matmul; kernels/cpu/gemm.hpp), and the same GPT in PyTorch in fp32 and under CPU autocast to
# bfloat16 (benchmarks/pytorch_gpt.py --bf16). Per run: the step time (mean and median over the
# measured steps) and the last step's loss; then what bf16 buys each framework (fp32 / bf16 step
# time), PyTorch / noeira at each precision, and beside them the machine's sgemm rate and the
# products' own rates: OpenBLAS sgemm, oneDNN's bf16 matmul with and without the conversion of
# its operands (bench_sgemm).
#
#   benchmarks/mixed_precision.sh [build-dir] [steps] [model]   (defaults: build 4 gpt-small)
#   environment: WARMUP=1 steps before the measured ones, BATCH=32, THREADS=2,
#                DATA=/usr/share/games/fortunes
#
# The figures are only as good as the machine is quiet. Exits non-zero when a run fails.
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

source "$here/text_bench_setup.sh" mixed_precision
export OMP_NUM_THREADS=$threads OPENBLAS_NUM_THREADS=$threads

echo "== $(uptime); $(nproc) cores"
echo "== matrix products ($threads threads)"
"$bench" --benchmark_filter='BM_Sgemm1024|BM_Bf16Gemm1024|BM_RoundedSgemm1024' \
  --benchmark_format=json --benchmark_min_time=0.5 --benchmark_repetitions=3 > "$work/sgemm.json"
for precision in fp32 bf16; do
  echo "== noeira train --model $model --precision $precision" \
    "($warmup + $steps steps, batch $batch)"
  "$noeira" train --data text "${data_flag[@]}" --model "$model" --precision "$precision" \
    --batch "$batch" --steps "$total" --eval-every "$total" --eval-batches 1 --log-every 1 \
    --threads "$threads" --out "$work/noeira-$precision" > "$work/noeira-$precision.out"
  flags=()
  [[ $precision == bf16 ]] && flags=(--bf16)
  echo "== PyTorch ${flags[*]}"
  "$python" "$here/pytorch_gpt.py" train --data "$data" --model "$model" "${flags[@]}" \
    --batch "$batch" --steps "$total" --time-from "$warmup" --threads "$threads" --log-every 1 \
    > "$work/torch-$precision.out"
done

"$python" - "$work" "$warmup" "$threads" "$here" <<'PY'
import json, re, statistics, sys
work, warmup, threads = sys.argv[1], int(sys.argv[2]), sys.argv[3]
sys.path.insert(0, sys.argv[4])
from noeira_runs import step_times
rates = {}
for b in json.load(open(f"{work}/sgemm.json"))["benchmarks"]:
    if b.get("run_type") == "iteration":
        name = b["name"].split("/")[0]
        rates[name] = max(rates.get(name, 0.0), b["gflops"])
print(f"\nproducts 1024^3 at {threads} threads, best of 3 (GFLOP/s):")
for name, rate in sorted(rates.items()):
    print(f"  {name:34s} {rate:8.1f}")

def noeira(precision):
    times, losses = step_times(f"{work}/noeira-{precision}", warmup)
    return times, losses[-1]

def torch(precision):
    out = open(f"{work}/torch-{precision}.out").read()
    losses = re.findall(r"loss ([0-9.]+)", out)
    return json.loads(out.strip().splitlines()[-1])["step_times"], float(losses[-1])

ours = {p: noeira(p) for p in ("fp32", "bf16")}
theirs = {p: torch(p) for p in ("fp32", "bf16")}
print(f"\n{'run':22s} {'ms/step mean':>12s} {'median':>8s} {'last loss':>10s}")
for name, runs in (("noeira", ours), ("pytorch", theirs)):
    for p in ("fp32", "bf16"):
        t, loss = runs[p]
        print(f"{name + ' ' + p:22s} {1e3 * statistics.mean(t):12.1f} "
              f"{1e3 * statistics.median(t):8.1f} {loss:10.4f}")
for name, runs in (("noeira", ours), ("pytorch", theirs)):
    gain = statistics.mean(runs['fp32'][0]) / statistics.mean(runs['bf16'][0])
    print(f"{name}: fp32 / bf16 step time {gain:.3f}x")
for p in ("fp32", "bf16"):
    print(f"{p} steps, pytorch / noeira time: "
          f"{statistics.mean(theirs[p][0]) / statistics.mean(ours[p][0]):.2f}x")
PY
