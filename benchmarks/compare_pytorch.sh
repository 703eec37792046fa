#!/bin/bash
# Side by side on this machine, in one go: `noeira train --model mlp` and the same MLP, batch,
# optimizer, schedule and epochs in PyTorch (benchmarks/pytorch_mlp.py, /usr/bin/python3 with
# Debian's python3-torch), both on the same number of threads; then the GEMM-bound limit of an
# epoch from the rates of noeira's matrix products and of OpenBLAS's sgemm here
# (benchmarks/bench_sgemm.cpp), and beside it the products and Adam's update together, each timed
# alone (benchmarks/bench_optimizer.cpp: Adam, and a stream over the bytes it moves): what the
# epoch cannot shed however small the rest of the step gets. PyTorch (whose products are
# OpenBLAS's sgemm) runs twice: as shipped, and on the OpenBLAS kernels noeira picks
# (OPENBLAS_CORETYPE; they differ on a CPU OpenBLAS 0.3.21 does not know, see
# kernels/cpu/blas_core.hpp): PyTorch at its best here.
#
#   benchmarks/compare_pytorch.sh [build-dir] [epochs] [threads]     (defaults: build 3 2)
#   environment: REPEAT=1 rounds of (sgemm, noeira, PyTorch as shipped, PyTorch on noeira's
#                kernels), alternating, so that a slow spell of a shared machine falls on every
#                side; each round's figures, then the median of the rounds' ratios and the
#                epoch at its best over all rounds against the GEMMs at theirs
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
repeat=${REPEAT:-1}
python=/usr/bin/python3

noeira=$build/noeira
bench=$build/benchmarks/bench_sgemm
optimizer_bench=$build/benchmarks/bench_optimizer
for f in "$noeira" "$bench" "$optimizer_bench"; do
  [[ -x $f ]] || { echo "compare_pytorch: $f not built (cmake --build $build)" >&2; exit 1; }
done
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

for ((r = 1; r <= repeat; r++)); do
  out=$work/round$r
  mkdir -p "$out"
  echo "== round $r of $repeat: sgemm rates (OpenBLAS, $threads threads)"
  OPENBLAS_NUM_THREADS=$threads OMP_NUM_THREADS=$threads "$bench" --benchmark_format=json \
    --benchmark_min_time=0.5 > "$out/sgemm.json"
  OMP_NUM_THREADS=$threads "$optimizer_bench" --benchmark_format=json --benchmark_min_time=0.5 \
    > "$out/optimizer.json"

  echo "== round $r: noeira train ($epochs epochs, $threads threads)"
  "$noeira" train --model mlp --data-dir "$data_dir" --epochs "$epochs" --threads "$threads" \
    --log-every 0 --out "$out/noeira" > "$out/noeira.out"
  grep -E '^epoch|OpenBLAS kernels' "$out/noeira.out"
  # PyTorch links the same OpenBLAS: once as shipped, once on the kernels noeira ran on (where
  # OpenBLAS does not know the CPU noeira picks them itself: kernels/cpu/blas_core.hpp).
  core=$(sed -n 's/.*OpenBLAS kernels \([A-Za-z0-9]*\).*/\1/p' "$out/noeira.out" | head -1)
  [[ -n $core ]] || { echo "compare_pytorch: noeira named no OpenBLAS kernels" >&2; exit 1; }

  echo "== round $r: PyTorch as shipped ($epochs epochs, $threads threads)"
  env -u OPENBLAS_CORETYPE "$python" "$here/pytorch_mlp.py" --data-dir "$data_dir" \
    --epochs "$epochs" --threads "$threads" > "$out/torch.out"
  grep -v '^{' "$out/torch.out"
  echo "== round $r: PyTorch with OPENBLAS_CORETYPE=$core ($epochs epochs, $threads threads)"
  OPENBLAS_CORETYPE=$core "$python" "$here/pytorch_mlp.py" --data-dir "$data_dir" \
    --epochs "$epochs" --threads "$threads" > "$out/torch_core.out"
  grep -v '^{' "$out/torch_core.out"
  echo "$core" > "$out/core"
done

"$python" - "$work" "$repeat" <<'PY'
import json, statistics, sys
work, repeat = sys.argv[1], int(sys.argv[2])
params = 784 * 256 + 256 + 256 * 128 + 128 + 128 * 10 + 10
samples, batch = 60000, 100
flop = 6 * params * samples
print()
print(f"params {params}, 6*params*samples = {flop / 1e9:.1f} GFLOP per epoch")
summary = []
bests = []  # per round: noeira's best epoch, the step's GEMMs timed, and they with Adam's update
for r in range(1, repeat + 1):
    out = f"{work}/round{r}"
    bench = {b["name"]: b for b in json.load(open(f"{out}/sgemm.json"))["benchmarks"]}
    peak = bench["BM_Sgemm1024/real_time"]["gflops"] * 1e9
    step = bench["BM_MlpStepProducts/real_time"]  # noeira's products: the library it trains on
    step_rate = step["gflops"] * 1e9
    step_gemm_s = step["real_time"] * 1e-6  # microseconds per step
    step_sgemm_s = bench["BM_MlpStepGemms/real_time"]["real_time"] * 1e-6  # OpenBLAS's sgemm
    product_peak = bench["BM_Fp32Product1024/real_time"]["gflops"] * 1e9
    optimizer = {b["name"]: b for b in json.load(open(f"{out}/optimizer.json"))["benchmarks"]}
    adam_s = optimizer["BM_MlpAdam/real_time"]["real_time"] * 1e-6  # per step
    stream_s = optimizer["BM_MlpStreamOfAdamsBytes/real_time"]["real_time"] * 1e-6
    ours = [json.loads(l) for l in open(f"{out}/noeira/metrics.jsonl")]
    ours = [x for x in ours if x["type"] == "epoch"]
    core = open(f"{out}/core").read().strip()
    shipped = json.loads(open(f"{out}/torch.out").read().strip().splitlines()[-1])
    theirs = json.loads(open(f"{out}/torch_core.out").read().strip().splitlines()[-1])
    t_ours = statistics.median(x["epoch_time_s"] for x in ours)
    t_torch = statistics.median(theirs["epoch_times"])
    t_shipped = statistics.median(shipped["epoch_times"])
    b_ours = min(x["epoch_time_s"] for x in ours)
    b_torch = min(theirs["epoch_times"])
    lim_peak, lim_shapes = flop / peak, flop / step_rate
    lim_own = step_gemm_s * samples / batch  # the GEMMs noeira actually runs (no dx for layer 0)
    lim_adam = (step_gemm_s + adam_s) * samples / batch  # and Adam's update, each alone
    print()
    print(f"round {r}:")
    print(f"sgemm peak (1024^3, OpenBLAS)  {peak / 1e9:7.1f} GFLOP/s -> limit {lim_peak:.3f} s/epoch")
    print(f"noeira's products, 1024^3      {product_peak / 1e9:7.1f} GFLOP/s")
    print(f"products at the step's shapes  {step_rate / 1e9:7.1f} GFLOP/s -> limit {lim_shapes:.3f} s/epoch")
    print(f"the step's own GEMMs, timed    {step_gemm_s * 1e3:7.3f} ms/step  -> {lim_own:.3f} s/epoch "
          f"(through OpenBLAS's sgemm {step_sgemm_s * 1e3:.3f} ms/step)")
    print(f"Adam's update alone, timed     {adam_s * 1e3:7.3f} ms/step  -> products + Adam "
          f"{lim_adam:.3f} s/epoch (a stream over its {optimizer['BM_MlpAdam/real_time']['bytes'] / 1e6:.1f} MB: "
          f"{stream_s * 1e3:.3f} ms/step)")
    print(f"noeira  epoch {t_ours:6.3f} s (median of {[round(x['epoch_time_s'], 3) for x in ours]}), "
          f"test acc {100 * ours[-1]['test_accuracy']:.2f}%")
    for label, run in ((f"pytorch ({core})", theirs), ("pytorch (as shipped)", shipped)):
        print(f"{label} epoch {statistics.median(run['epoch_times']):6.3f} s (median of "
              f"{[round(t, 3) for t in run['epoch_times']]}), test acc {100 * run['test_accuracy']:.2f}%")
    print(f"speed-up over PyTorch on the OpenBLAS kernels {core}: {t_torch / t_ours:.2f}x median, "
          f"{b_torch / b_ours:.2f}x best (best epochs {b_ours:.3f} s vs {b_torch:.3f} s; target >= 2x)")
    print(f"speed-up over PyTorch as shipped: {t_shipped / t_ours:.2f}x median, "
          f"{min(shipped['epoch_times']) / b_ours:.2f}x best")
    print(f"epoch over its own GEMMs: {t_ours / lim_own:.2f}x median, {b_ours / lim_own:.2f}x best "
          f"(target <= 1.15x); over its GEMMs + Adam: {t_ours / lim_adam:.2f}x median, "
          f"{b_ours / lim_adam:.2f}x best")
    print(f"fraction of the GEMM limit (median / best epoch): "
          f"{lim_peak / t_ours:.0%} / {lim_peak / b_ours:.0%} at peak rate, "
          f"{lim_shapes / t_ours:.0%} / {lim_shapes / b_ours:.0%} at the step's shapes")
    summary.append((t_torch / t_ours, t_shipped / t_ours, t_ours / lim_own))
    bests.append((b_ours, lim_own, lim_adam))
    if ours[-1]["test_accuracy"] < 0.80:
        sys.exit("compare_pytorch: noeira's accuracy is implausibly low: a wrong result, not a benchmark")
if repeat > 1:
    same, shipped_r, own = (statistics.median(x[i] for x in summary) for i in range(3))
    print()
    print(f"median over {repeat} rounds: {same:.2f}x PyTorch on those kernels, "
          f"{shipped_r:.2f}x PyTorch as shipped, epoch {own:.2f}x its own GEMMs")
    print("  rounds: " + ", ".join(f"{a:.2f}x / {b:.2f}x / {c:.2f}x" for a, b, c in summary))
    # A slow spell can fall on the GEMMs' timing or on the epochs of a round, and a round's ratio
    # then says more about the spell than about the step: each side at its best over all rounds.
    epoch, gemms, with_adam = (min(x[i] for x in bests) for i in range(3))
    print(f"best over {repeat} rounds: epoch {epoch:.3f} s, its GEMMs {gemms:.3f} s: "
          f"{epoch / gemms:.2f}x (target <= 1.15x); its GEMMs + Adam {with_adam:.3f} s: "
          f"{epoch / with_adam:.2f}x")
PY
