#!/bin/bash
# --reduce-dtype bf16 against fp32, side by side in one run (issue 14's mixed precision):
#  1. one gradient reduction (benchmarks/bench_reduce_dtype.cpp: our fp32 op, our bf16 op with
#     its conversions, raw MPI's fp32 op), 2 ranks, over shared memory (one node) and over TCP
#     through the loopback device shaped to LINK, a cluster's network (default 10gbit: 10 GbE);
#  2. one epoch of the MLP on Fashion-MNIST at 2 ranks x 1 thread over that link: noeira DDP with
#     fp32 and with bf16 reductions, and PyTorch DDP (gloo, benchmarks/pytorch_ddp.py) as it is
#     and with fp16_compress_hook, its nearest peer (gloo has no bf16 sums).
#
#   benchmarks/reduce_dtype.sh [build-dir] [link-rate|none]      (defaults: build 10gbit)
#
# Shaping needs root and tc (iproute2): a token bucket on lo (`tc qdisc replace dev lo root tbf`),
# removed again on exit; with `none`, or without either, the TCP runs use the loopback as it is
# (memory speed: no network to save). Every process on the machine shares the shaped loopback
# while this runs. Exits non-zero when a run fails or a result is wrong.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
build=${1:-$here/../build}
link=${2:-10gbit}
data_dir=${DATA_DIR:-/usr/share/datasets/fashion-mnist}
python=/usr/bin/python3
bench=$build/benchmarks/bench_reduce_dtype
noeira=$build/noeira
for f in "$bench" "$noeira"; do
  [[ -x $f ]] || { echo "reduce_dtype: $f not built (cmake --build $build)" >&2; exit 1; }
done
if [[ $EUID -eq 0 ]]; then
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
fi
command -v ssh > /dev/null || export OMPI_MCA_plm=isolated
export OMP_NUM_THREADS=1
work=$(mktemp -d)
shaped=0
cleanup() {
  if (( shaped )); then tc qdisc del dev lo root 2> /dev/null || true; fi
  rm -rf "$work"
}
trap cleanup EXIT
tcp=(--mca btl tcp,self --mca btl_tcp_if_include lo -x NOEIRA_SHARED_MEMORY=0)

echo "== $(uptime)"
echo "== one reduction, 2 ranks, shared memory (one node)"
mpirun -np 2 "$bench"

if [[ $link != none ]] && [[ $EUID -eq 0 ]] && command -v tc > /dev/null &&
   tc qdisc replace dev lo root tbf rate "$link" burst 1mb latency 50ms; then
  shaped=1
  echo "== loopback shaped to $link: $(tc qdisc show dev lo)"
else
  link="the loopback as it is"
  echo "== loopback not shaped (link 'none', not root, or no tc)"
fi
echo "== one reduction, 2 ranks, TCP over $link"
mpirun -np 2 "${tcp[@]}" "$bench"

echo "== mlp, one epoch, 2 ranks x 1 thread, TCP over $link"
for wire in fp32 bf16; do
  mpirun -np 2 "${tcp[@]}" "$noeira" train --model mlp --data-dir "$data_dir" --policy ddp \
    --reduce-dtype "$wire" --epochs 1 --batch 100 --lr 1e-3 --threads 1 --log-every 0 \
    --out "$work/noeira-$wire" > "$work/noeira-$wire.out" 2>&1 ||
    { cat "$work/noeira-$wire.out" >&2; exit 1; }
  grep -E '^epoch' "$work/noeira-$wire.out" | sed "s/^/noeira $wire reductions: /"
done
core=$(sed -n 's/.*OpenBLAS kernels \([A-Za-z0-9]*\).*/\1/p' "$work/noeira-fp32.out" | head -1)
for compress in none fp16; do
  OPENBLAS_CORETYPE=$core "$python" "$here/pytorch_ddp.py" --policy ddp --world 2 --threads 1 \
    --data-dir "$data_dir" --epochs 1 --batch 100 --lr 1e-3 --compress "$compress" \
    > "$work/torch-$compress.out"
  grep -v '^{' "$work/torch-$compress.out" | sed "s/^/PyTorch compress $compress: /"
done

"$python" - "$work" <<'PY'
import json, sys
work = sys.argv[1]
def ours(wire):
    recs = [json.loads(l) for l in open(f"{work}/noeira-{wire}/metrics.jsonl")]
    return [x for x in recs if x["type"] == "epoch"][-1]
def theirs(compress):
    return json.loads(open(f"{work}/torch-{compress}.out").read().strip().splitlines()[-1])
o32, o16 = ours("fp32"), ours("bf16")
t32, t16 = theirs("none"), theirs("fp16")
rows = [("noeira, fp32 reductions", o32["epoch_time_s"], o32["test_accuracy"]),
        ("noeira, bf16 reductions", o16["epoch_time_s"], o16["test_accuracy"]),
        ("PyTorch DDP", t32["epoch_times"][-1], t32["test_accuracy"]),
        ("PyTorch DDP, fp16_compress_hook", t16["epoch_times"][-1], t16["test_accuracy"])]
print()
print(f"{'run':34} {'epoch s':>8} {'test acc':>9}")
for name, t, acc in rows:
    print(f"{name:34} {t:8.3f} {100 * acc:8.2f}%")
print(f"bf16 / fp32 reductions (noeira): {o32['epoch_time_s'] / o16['epoch_time_s']:.2f}x faster; "
      f"PyTorch fp16 hook / plain: {t32['epoch_times'][-1] / t16['epoch_times'][-1]:.2f}x; "
      f"PyTorch fp16 hook / noeira bf16: {t16['epoch_times'][-1] / o16['epoch_time_s']:.2f}x")
bad = [name for name, _, acc in rows if acc < 0.80]
if bad:
    sys.exit("reduce_dtype: implausible accuracy (a wrong result): " + ", ".join(bad))
PY
