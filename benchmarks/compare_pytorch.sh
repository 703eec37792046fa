#!/bin/bash
# Side by side on this machine, in one go: `noeira train --model mlp` and the same MLP, batch,
# optimizer, schedule and epochs in PyTorch (benchmarks/pytorch_mlp.py, /usr/bin/python3 with
# Debian's python3-torch), both on the same number of threads; then the GEMM-bound limit of an
# epoch from the sgemm rates OpenBLAS reaches here (benchmarks/bench_sgemm.cpp). PyTorch runs
# twice: as shipped, and on the OpenBLAS kernels noeira ran on (OPENBLAS_CORETYPE; they differ on
# a CPU OpenBLAS 0.3.21 does not know, see kernels/cpu/blas_core.hpp) — the like-for-like figure.
#
#   benchmarks/compare_pytorch.sh [build-dir] [epochs] [threads]     (defaults: build 3 2)
#
# Epoch times are training only (evaluation excluded): the median over the epochs, and the best
# epoch (less sensitive to other load on a shared machine), each compared like with like. The
# limit is the
# issue's definition, 6·params·samples FLOP per epoch, at two rates: the peak (sgemm 1024^3) and
# the flop-weighted rate of the step's own GEMM shapes (batch 100). The figures are only as good
# as the machine is quiet: run it with nothing else on the cores.
# Exits non-zero when a run fails or noeira's final accuracy is implausible (< 80%).
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
build=${1:-$here/../build}
epochs=${2:-3}
threads=${3:-2}
data_dir=${DATA_DIR:-/usr/share/datasets/fashion-mnist}
python=/usr/bin/python3

noeira=$build/noeira
bench=$build/benchmarks/bench_sgemm
for f in "$noeira" "$bench"; do
  [[ -x $f ]] || { echo "compare_pytorch: $f not built (cmake --build $build)" >&2; exit 1; }
done
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

echo "== sgemm rates (OpenBLAS, $threads threads)"
OPENBLAS_NUM_THREADS=$threads OMP_NUM_THREADS=$threads "$bench" --benchmark_format=json \
  --benchmark_min_time=0.5 > "$work/sgemm.json"

echo "== noeira train ($epochs epochs, $threads threads)"
"$noeira" train --model mlp --data-dir "$data_dir" --epochs "$epochs" --threads "$threads" \
  --log-every 0 --out "$work/noeira" > "$work/noeira.out"
grep -E '^epoch|OpenBLAS kernels' "$work/noeira.out"
# PyTorch links the same OpenBLAS: once as shipped, once on the kernels noeira ran on (where
# OpenBLAS does not know the CPU noeira picks them itself: kernels/cpu/blas_core.hpp).
core=$(sed -n 's/.*OpenBLAS kernels \([A-Za-z0-9]*\).*/\1/p' "$work/noeira.out" | head -1)
[[ -n $core ]] || { echo "compare_pytorch: noeira named no OpenBLAS kernels" >&2; exit 1; }

echo "== PyTorch as shipped ($epochs epochs, $threads threads)"
env -u OPENBLAS_CORETYPE "$python" "$here/pytorch_mlp.py" --data-dir "$data_dir" \
  --epochs "$epochs" --threads "$threads" > "$work/torch.out"
grep -v '^{' "$work/torch.out"
echo "== PyTorch with OPENBLAS_CORETYPE=$core ($epochs epochs, $threads threads)"
OPENBLAS_CORETYPE=$core "$python" "$here/pytorch_mlp.py" --data-dir "$data_dir" \
  --epochs "$epochs" --threads "$threads" > "$work/torch_core.out"
grep -v '^{' "$work/torch_core.out"
echo "$core" > "$work/core"

"$python" - "$work" <<'PY'
import json, statistics, sys
work = sys.argv[1]
bench = {b["name"]: b for b in json.load(open(f"{work}/sgemm.json"))["benchmarks"]}
peak = bench["BM_Sgemm1024/real_time"]["gflops"] * 1e9
step = bench["BM_MlpStepGemms/real_time"]
step_rate = step["gflops"] * 1e9
step_gemm_s = step["real_time"] * 1e-6  # microseconds per step
ours = [json.loads(l) for l in open(f"{work}/noeira/metrics.jsonl")]
ours = [r for r in ours if r["type"] == "epoch"]
core = open(f"{work}/core").read().strip()
shipped = json.loads(open(f"{work}/torch.out").read().strip().splitlines()[-1])
theirs = json.loads(open(f"{work}/torch_core.out").read().strip().splitlines()[-1])
params = 784 * 256 + 256 + 256 * 128 + 128 + 128 * 10 + 10
samples, batch = 60000, 100
flop = 6 * params * samples
t_ours = statistics.median(r["epoch_time_s"] for r in ours)
t_torch = statistics.median(theirs["epoch_times"])
b_ours = min(r["epoch_time_s"] for r in ours)
b_torch = min(theirs["epoch_times"])
lim_peak, lim_shapes = flop / peak, flop / step_rate
lim_own = step_gemm_s * samples / batch  # the GEMMs noeira actually runs (no dx for layer 0)
print()
print(f"params {params}, 6*params*samples = {flop / 1e9:.1f} GFLOP per epoch")
print(f"sgemm peak (1024^3)            {peak / 1e9:7.1f} GFLOP/s -> limit {lim_peak:.3f} s/epoch")
print(f"sgemm at the step's shapes     {step_rate / 1e9:7.1f} GFLOP/s -> limit {lim_shapes:.3f} s/epoch")
print(f"the step's own GEMMs, timed    {step_gemm_s * 1e3:7.3f} ms/step  -> {lim_own:.3f} s/epoch")
print()
print(f"noeira  epoch {t_ours:6.3f} s (median of {[round(r['epoch_time_s'], 3) for r in ours]}), "
      f"test acc {100 * ours[-1]['test_accuracy']:.2f}%")
for label, run in ((f"pytorch ({core})", theirs), ("pytorch (as shipped)", shipped)):
    print(f"{label} epoch {statistics.median(run['epoch_times']):6.3f} s (median of "
          f"{[round(t, 3) for t in run['epoch_times']]}), test acc {100 * run['test_accuracy']:.2f}%")
print(f"speed-up over PyTorch on the same kernels ({core}): {t_torch / t_ours:.2f}x median, "
      f"{b_torch / b_ours:.2f}x best (best epochs {b_ours:.3f} s vs {b_torch:.3f} s; target >= 2x)")
print(f"speed-up over PyTorch as shipped: "
      f"{statistics.median(shipped['epoch_times']) / t_ours:.2f}x median, "
      f"{min(shipped['epoch_times']) / b_ours:.2f}x best")
print(f"epoch over its own GEMMs: {t_ours / lim_own:.2f}x median, {b_ours / lim_own:.2f}x best "
      f"(target <= 1.15x)")
print(f"fraction of the GEMM limit (median / best epoch): "
      f"{lim_peak / t_ours:.0%} / {lim_peak / b_ours:.0%} at peak rate, "
      f"{lim_shapes / t_ours:.0%} / {lim_shapes / b_ours:.0%} at the step's shapes (target >= 50%)")
if ours[-1]["test_accuracy"] < 0.80:
    sys.exit("compare_pytorch: noeira's accuracy is implausibly low: a wrong result, not a benchmark")
PY
