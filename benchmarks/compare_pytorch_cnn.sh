#!/bin/bash
# Side by side on this machine, in one go: `noeira train --model cnn` and `--model resnet20` on
# Fashion-MNIST and the same networks, batch, optimizer (Adam lr 1e-3, noeira's cosine schedule)
# and threads in PyTorch (benchmarks/pytorch_cnn.py, CPU: convolutions through oneDNN, a strong
# peer); then the limit a step would reach at the sgemm rate OpenBLAS reaches here
# (benchmarks/bench_sgemm.cpp, 1024^3), and, with perf, where noeira's time goes.
#
# Kernels: PyTorch links the same OpenBLAS as noeira (its Linear layers; oneDNN does its
# convolutions), so it runs twice: as shipped (what a user gets) and with the OPENBLAS_CORETYPE
# noeira ran on (its header names it; kernels/cpu/blas_core.hpp), the like-for-like figure.
#
#   benchmarks/compare_pytorch_cnn.sh [build-dir] [steps] [threads]   (defaults: build 20 2)
#   environment: MODELS="cnn resnet20" (any presets both sides have: mlp works too)
#                WARMUP=3 steps before the measured ones, BATCH=128,
#                DATA_DIR=/usr/share/datasets/fashion-mnist
#                REPEAT=1 rounds of (sgemm, then per model noeira, PyTorch, PyTorch on noeira's
#                kernels), alternating, so that a slow spell of a shared machine falls on every
#                side; each round's figures, then the best round's
#                PROFILE=1 (default where perf works) one more noeira run per model under
#                `perf record`, and its heaviest symbols: where the time goes
#
# Timing: each side runs WARMUP + steps steps on the first (WARMUP + steps) x BATCH training
# images and times each step (noeira from its step records, --log-every 1, elapsed_s; PyTorch
# around batch gather, forward, backward, update and the loss read back); the figures are over
# the measured steps: the mean (total time / steps, what samples/s is made of), the median and the
# best step. The limit is 3 x the forward's multiply-adds x 2 FLOP per sample (convolutions and
# Linear layers, counted by pytorch_cnn.py) at the sgemm rate: a compute bound no side can beat.
#
# The figures are only as good as the machine is quiet: run it with nothing else on the cores.
# Exits non-zero when a run fails, the two disagree on the parameter count (not the same
# network), or a loss is not finite.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
build=${1:-$here/../build}
steps=${2:-20}
threads=${3:-2}
models=${MODELS:-cnn resnet20}
warmup=${WARMUP:-3}
batch=${BATCH:-128}
data_dir=${DATA_DIR:-/usr/share/datasets/fashion-mnist}
repeat=${REPEAT:-1}
python=/usr/bin/python3

noeira=$build/noeira
bench=$build/benchmarks/bench_sgemm
for f in "$noeira" "$bench"; do
  [[ -x $f ]] || { echo "compare_pytorch_cnn: $f not built (cmake --build $build)" >&2; exit 1; }
done
# A preset this noeira lacks is named before anything runs.
presets=$("$noeira" train --help)
for m in $models; do
  grep -qE "^ +$m: " <<< "$presets" ||
    { echo "compare_pytorch_cnn: $noeira has no preset '$m' (MODELS=mlp runs the rest)" >&2; exit 1; }
done
if [[ -z ${PROFILE:-} ]]; then
  PROFILE=0
  perf stat -e task-clock true > /dev/null 2>&1 && PROFILE=1
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
total=$((warmup + steps))
export OMP_NUM_THREADS=$threads OPENBLAS_NUM_THREADS=$threads

# Training only: one epoch of exactly `total` steps; the evaluation at its end reads one batch.
noeira_run() {  # model, output directory, then a command to run noeira under (may be empty)
  local model=$1 out=$2
  shift 2
  "$@" "$noeira" train --model "$model" --data-dir "$data_dir" --epochs 1 --batch "$batch" \
    --limit-train $((total * batch)) --limit-test "$batch" --eval-batch "$batch" \
    --log-every 1 --threads "$threads" --out "$out"
}

torch_run() {  # model, then the environment to run it in (env's arguments)
  local model=$1
  shift
  env "$@" "$python" "$here/pytorch_cnn.py" --model "$model" --data-dir "$data_dir" \
    --steps "$total" --time-from "$warmup" --batch "$batch" --threads "$threads"
}

# Others' work on the cores ruins the figures (OpenMP's waiting threads suffer most): say it.
load_before=$(cut -d' ' -f1 /proc/loadavg)
echo "== load average before: $load_before (1 min)"
awk -v l="$load_before" 'BEGIN { exit !(l > 1.0) }' &&
  echo "   warning: the machine is busy; the figures below will be slower than its own"
core=
for ((r = 1; r <= repeat; ++r)); do
  echo "== round $r of $repeat: sgemm rate (OpenBLAS, $threads threads)"
  # Three repetitions; the best of every round is the peak (others' load only ever slows it).
  "$bench" --benchmark_filter='BM_Sgemm1024' --benchmark_format=json --benchmark_min_time=0.5 \
    --benchmark_repetitions=3 > "$work/sgemm$r.json"
  for m in $models; do
    echo "== round $r: noeira train --model $m ($warmup + $steps steps, batch $batch," \
         "$threads threads)"
    noeira_run "$m" "$work/noeira-$m-$r" > "$work/noeira-$m-$r.out"
    [[ $r == 1 ]] && grep -E '^noeira train:|^  ' "$work/noeira-$m-$r.out"
    core=$(sed -n 's/.*OpenBLAS kernels \([A-Za-z0-9]*\).*/\1/p' "$work/noeira-$m-$r.out" | head -1)
    [[ -n $core ]] || { echo "compare_pytorch_cnn: noeira named no OpenBLAS kernels" >&2; exit 1; }
    echo "== round $r: PyTorch --model $m as shipped"
    torch_run "$m" -u OPENBLAS_CORETYPE > "$work/torch-$m-$r.out"
    [[ $r == 1 ]] && grep -v '^{' "$work/torch-$m-$r.out"
    echo "== round $r: PyTorch --model $m with OPENBLAS_CORETYPE=$core, noeira's kernels"
    torch_run "$m" OPENBLAS_CORETYPE="$core" > "$work/torch_core-$m-$r.out"
  done
done
echo "$core" > "$work/core"

if [[ $PROFILE == 1 ]]; then
  for m in $models; do
    echo "== where noeira's time goes: --model $m under perf record (the whole run: loading" \
         "and the one evaluation batch too)"
    noeira_run "$m" "$work/perf-$m" perf record -q -F 499 -o "$work/perf-$m.data" -- \
      > /dev/null 2>&1
    # The run's samples by library, then its heaviest symbols. Read libz as the data set's
    # decompression at start-up, libgomp's unnamed addresses as OpenMP threads waiting at a
    # barrier or for work, libopenblas as the GEMMs, noeira as its own kernels.
    echo "   by library:"
    perf report -i "$work/perf-$m.data" --stdio --no-children --sort dso -F overhead,dso \
      2> /dev/null | grep -E '^ +[0-9.]+%' | sort -rn | head -8
    echo "   heaviest symbols:"
    perf report -i "$work/perf-$m.data" --stdio --no-children -F overhead,dso,sym \
      --percent-limit 1.5 2> /dev/null | grep -E '^ +[0-9.]+%' | sort -rn | head -15 | cut -c1-150
  done
fi

echo "== load average after: $(cut -d' ' -f1 /proc/loadavg) (1 min, this script's runs included)"
"$python" - "$work" "$batch" "$repeat" $models <<'PY'
import json, math, re, statistics, sys
work, batch, repeat, models = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4:]
core = open(f"{work}/core").read().strip()
failures = []

def last_json(path):
    return json.loads(open(path).read().strip().splitlines()[-1])

peak = max(b["gflops"] for r in range(1, repeat + 1)
           for b in json.load(open(f"{work}/sgemm{r}.json"))["benchmarks"]
           if b["name"] == "BM_Sgemm1024/real_time" and b.get("run_type") == "iteration") * 1e9

def figures(times):
    return sum(times) / len(times), statistics.median(times), min(times)

labels = {"noeira": f"noeira ({core})", "pytorch": "pytorch (as shipped)",
          "pytorch_core": f"pytorch ({core})"}

def report(label, row, flop_per_step):
    limit = flop_per_step / peak
    print(label)
    for name in labels:
        mean, median, best = row[name]
        print(f"  {labels[name]:22s} {1e3 * mean:9.2f} ms/step mean (median {1e3 * median:.2f}, "
              f"best step {1e3 * best:.2f})  {batch / mean:8.1f} samples/s  "
              f"{limit / mean:5.1%} of the sgemm limit")
    n = row["noeira"]
    for name in ("pytorch_core", "pytorch"):
        t = row[name]
        print(f"  noeira / {labels[name]} samples/s: {t[0] / n[0]:.2f}x mean, "
              f"{t[1] / n[1]:.2f}x median, {t[2] / n[2]:.2f}x best step")
    print("  (issue target: >= 1.0x PyTorch on cnn and resnet20)")

print()
print(f"sgemm peak (1024^3, OpenBLAS {core} kernels) {peak / 1e9:.1f} GFLOP/s")
for model in models:
    rounds = []
    for r in range(1, repeat + 1):
        header = open(f"{work}/noeira-{model}-{r}.out").read()
        m = re.search(r"model \S+ \((\d+) parameters\)", header)
        theirs = last_json(f"{work}/torch-{model}-{r}.out")
        ours_params = int(m.group(1)) if m else -1
        if ours_params != theirs["params"]:
            failures.append(f"{model}: noeira has {ours_params} parameters, pytorch "
                            f"{theirs['params']}: not the same network")
        records = [json.loads(l) for l in open(f"{work}/noeira-{model}-{r}/metrics.jsonl")]
        steps = [x for x in records if x["type"] == "step"]
        elapsed = {x["step"]: x["elapsed_s"] for x in steps}
        elapsed.setdefault(0, 0.0)
        time_from = theirs["time_from"]
        ours = [elapsed[s] - elapsed[s - 1] for s in range(time_from + 1, max(elapsed) + 1)]
        if len(ours) != len(theirs["step_times"]):
            failures.append(f"{model}: noeira measured {len(ours)} steps, pytorch "
                            f"{len(theirs['step_times'])}")
        if not all(math.isfinite(x["loss"]) for x in steps):
            failures.append(f"{model}: noeira's training loss is not finite")
        if not all(math.isfinite(x) for x in theirs["losses"]):
            failures.append(f"{model}: pytorch's training loss is not finite")
        rounds.append({"noeira": ours, "pytorch": theirs["step_times"],
                       "pytorch_core": last_json(f"{work}/torch_core-{model}-{r}.out")["step_times"]})
    flop_per_step = theirs["train_flop_per_sample"] * batch
    print()
    print(f"--model {model}: {ours_params} parameters, batch {batch}, "
          f"{flop_per_step / 1e9:.2f} GFLOP per step (3 x the forward's convolutions and "
          f"products) -> sgemm limit {1e3 * flop_per_step / peak:.2f} ms/step")
    rows = [{k: figures(v) for k, v in rd.items()} for rd in rounds]
    for r, row in enumerate(rows, 1):
        report(f"round {r} ({len(rounds[r - 1]['noeira'])} measured steps each):", row,
               flop_per_step)
    if repeat > 1:
        report(f"best round of each ({repeat} rounds, by the mean):",
               {k: min((row[k] for row in rows), key=lambda f: f[0]) for k in labels},
               flop_per_step)
for f in failures:
    print("compare_pytorch_cnn: " + f, file=sys.stderr)
sys.exit(1 if failures else 0)
PY
