#!/bin/bash
# Side by side on this machine: `mpirun -np 2 noeira train --policy ddp|zero1|zero2|zero3` (2 MPI
# ranks x 1 thread) and PyTorch DDP / DDP + ZeroRedundancyOptimizer (gloo, 2 processes x 1 thread,
# benchmarks/pytorch_ddp.py with /usr/bin/python3 and Debian's python3-torch): the same MLP
# (784-256-128-10, ReLU), global batch 100 (50 per rank), Adam lr 1e-3 with cosine decay,
# Fashion-MNIST, one epoch each. PyTorch runs on the OpenBLAS kernels noeira ran on
# (OPENBLAS_CORETYPE, named in noeira's header; see kernels/cpu/blas_core.hpp), like for like.
#
#   benchmarks/compare_pytorch_ddp.sh [build-dir] [repeats]     (defaults: build 1)
#
# Epoch times are training only (evaluation excluded); with repeats > 1 every run is repeated,
# the runs interleaved, and the best epoch of each kept (the least disturbed by other load on a
# shared machine). The ratio is PyTorch's time over ours: DDP/ours compares with PyTorch DDP (the
# target is >= 4x), ZeRO/ours with PyTorch's ZeRO-1, its only ZeRO stage for DDP.
# MPIRUN_ARGS (env) goes to mpirun as is, e.g. "--bind-to none --mca mpi_yield_when_idle 1" when
# other jobs share the cores (a waiting rank then yields instead of spinning on a bound core).
# Exits non-zero when a run fails or an accuracy is implausible (< 80%).
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
build=${1:-$here/../build}
repeats=${2:-1}
data_dir=${DATA_DIR:-/usr/share/datasets/fashion-mnist}
python=/usr/bin/python3
np=2
policies=(ddp zero1 zero2 zero3)

noeira=$build/noeira
[[ -x $noeira ]] || { echo "compare_pytorch_ddp: $noeira not built (cmake --build $build)" >&2; exit 1; }
command -v mpirun > /dev/null || { echo "compare_pytorch_ddp: mpirun not found" >&2; exit 1; }
if [[ $EUID -eq 0 ]]; then
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
fi
# Open MPI launches even local ranks through its ssh/rsh agent unless told otherwise.
command -v ssh > /dev/null || export OMPI_MCA_plm=isolated
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

echo "== $(uptime); MPIRUN_ARGS='${MPIRUN_ARGS:-}'"
for ((r = 1; r <= repeats; r++)); do
  for policy in "${policies[@]}"; do
    echo "== noeira $policy, mpirun -np $np x 1 thread (run $r/$repeats)"
    # shellcheck disable=SC2086  # MPIRUN_ARGS is a list of flags
    mpirun -np "$np" ${MPIRUN_ARGS:-} "$noeira" train --model mlp --data-dir "$data_dir" --policy "$policy" \
      --epochs 1 --batch 100 --lr 1e-3 --threads 1 --log-every 0 --out "$work/noeira-$policy-$r" \
      > "$work/noeira-$policy-$r.out" 2>&1 || { cat "$work/noeira-$policy-$r.out" >&2; exit 1; }
    grep -E '^epoch' "$work/noeira-$policy-$r.out"
  done
  core=$(sed -n 's/.*OpenBLAS kernels \([A-Za-z0-9]*\).*/\1/p' "$work/noeira-ddp-$r.out" | head -1)
  [[ -n $core ]] || { echo "compare_pytorch_ddp: noeira named no OpenBLAS kernels" >&2; exit 1; }
  for policy in ddp zero; do
    echo "== PyTorch $policy, $np processes x 1 thread, OPENBLAS_CORETYPE=$core (run $r/$repeats)"
    OPENBLAS_CORETYPE=$core "$python" "$here/pytorch_ddp.py" --policy "$policy" --world "$np" --threads 1 \
      --data-dir "$data_dir" --epochs 1 --batch 100 --lr 1e-3 > "$work/torch-$policy-$r.out"
    grep -v '^{' "$work/torch-$policy-$r.out"
  done
done
echo "== $(uptime)"

"$python" - "$work" "$repeats" "${policies[@]}" <<'PY'
import json, sys
work, repeats, policies = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
failed = []

def ours(policy):
    runs = []
    for r in range(1, repeats + 1):
        recs = [json.loads(l) for l in open(f"{work}/noeira-{policy}-{r}/metrics.jsonl")]
        runs.append([x for x in recs if x["type"] == "epoch"][-1])
    return runs

def theirs(policy):
    return [json.loads(open(f"{work}/torch-{policy}-{r}.out").read().strip().splitlines()[-1])
            for r in range(1, repeats + 1)]

t_ddp = theirs("ddp")
t_zero = theirs("zero")
best_ddp = min(x["epoch_times"][-1] for x in t_ddp)
best_zero = min(x["epoch_times"][-1] for x in t_zero)
for name, runs in (("PyTorch DDP", t_ddp), ("PyTorch ZeRO", t_zero)):
    if min(x["test_accuracy"] for x in runs) < 0.80:
        failed.append(f"{name} accuracy {min(x['test_accuracy'] for x in runs):.4f}")

print()
print(f"{'policy':8} {'ours s':>8} {'acc':>7} {'PyTorch DDP s':>14} {'PyTorch ZeRO s':>15} "
      f"{'DDP/ours':>9} {'ZeRO/ours':>10}")
for policy in policies:
    runs = ours(policy)
    best = min(x["epoch_time_s"] for x in runs)
    acc = min(x["test_accuracy"] for x in runs)
    if acc < 0.80:
        failed.append(f"noeira {policy} accuracy {acc:.4f}")
    print(f"{policy:8} {best:8.3f} {100 * acc:6.2f}% {best_ddp:14.3f} {best_zero:15.3f} "
          f"{best_ddp / best:8.2f}x {best_zero / best:9.2f}x")
print(f"PyTorch test acc: DDP {100 * min(x['test_accuracy'] for x in t_ddp):.2f}%, "
      f"ZeRO {100 * min(x['test_accuracy'] for x in t_zero):.2f}%; "
      f"times are the best of {repeats} run(s); target DDP/ours >= 4x")
if failed:
    sys.exit("compare_pytorch_ddp: implausible accuracy (a wrong result, not a benchmark): "
             + ", ".join(failed))
PY
