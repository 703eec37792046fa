#!/bin/bash
# A user's HDF5 data set of about 1 GB (float32 [N, 784] features, int64 labels of 10 classes
# around random centres; N = 340,000 by default), one epoch of the MLP, side by side on this
# machine in one go: `noeira train --data h5` against PyTorch 1.13 reading the same file with
# h5py through a DataLoader (benchmarks/pytorch_h5.py), same batch (100), model and optimizer,
# both on the same threads. Reports, for each: seconds to the end of the first step (noeira: the
# process's wall time less its epoch's training time and its evaluation), steady samples/s,
# with the features held in memory and streamed from the file (--stream-data),
# peak resident memory (/usr/bin/time), and for noeira the sgemm rate of this machine beside it.
#
#   benchmarks/compare_pytorch_h5.sh [build-dir] [threads] [rows]   (defaults: build 2 340000)
#   environment: WORKERS=0 DataLoader worker processes for PyTorch
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=${1:-$here/../build}
threads=${2:-2}
rows=${3:-340000}
workers=${WORKERS:-0}
python=/usr/bin/python3
noeira=$build/noeira
[[ -x $noeira ]] || { echo "compare_pytorch_h5: $noeira not built" >&2; exit 1; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

echo "== writing $rows rows of 784 float32 features ($((rows * 784 * 4 / 1000000)) MB) to train.h5"
"$python" - "$work" "$rows" <<'PY'
import sys
import h5py
import numpy as np
work, rows = sys.argv[1], int(sys.argv[2])
rng = np.random.default_rng(5)
centers = rng.normal(0.0, 1.0, (10, 784)).astype(np.float32)
for name, n in (("train", rows), ("test", 2000)):
    with h5py.File(f"{work}/{name}.h5", "w") as f:
        x = f.create_dataset("x", (n, 784), dtype="f4")
        y = f.create_dataset("y", (n,), dtype="i8")
        for s in range(0, n, 20000):
            e = min(n, s + 20000)
            labels = rng.integers(0, 10, e - s)
            x[s:e] = centers[labels] + rng.normal(0.0, 1.0, (e - s, 784)).astype(np.float32)
            y[s:e] = labels
PY
sync

for mode in held streamed; do
  flag=$([[ $mode == streamed ]] && echo --stream-data || true)
  echo "== noeira train --data h5 $flag (1 epoch, $threads threads)"
  /usr/bin/time -f "%e %M" -o "$work/$mode.time" "$noeira" train --data h5 --data-dir "$work" \
    --model mlp --epochs 1 --batch 100 --threads "$threads" --log-every 0 --out "$work/$mode" \
    $flag > "$work/$mode.out"
  grep -E '^epoch|products' "$work/$mode.out"
done
echo "== PyTorch, h5py through a DataLoader ($workers workers, 1 epoch, $threads threads)"
/usr/bin/time -f "%e %M" -o "$work/torch.time" "$python" "$here/pytorch_h5.py" \
  --file "$work/train.h5" --threads "$threads" --workers "$workers" > "$work/torch.out"
cat "$work/torch.out"
sgemm=$build/benchmarks/bench_sgemm
if [[ -x $sgemm ]]; then
  OPENBLAS_NUM_THREADS=$threads OMP_NUM_THREADS=$threads "$sgemm" --benchmark_format=json \
    --benchmark_filter=BM_Sgemm1024 --benchmark_min_time=0.5 > "$work/sgemm.json"
fi

"$python" - "$work" "$rows" <<'PY'
import json, os, sys
work, rows = sys.argv[1], int(sys.argv[2])
def wall_rss(name):
    wall, rss_kb = open(f"{work}/{name}.time").read().split()
    return float(wall), int(rss_kb) / 1024
def noeira(mode):
    epoch = [json.loads(l) for l in open(f"{work}/{mode}/metrics.jsonl")]
    epoch = [e for e in epoch if e["type"] == "epoch"][0]
    wall, rss = wall_rss(mode)
    rate = (rows // 100 * 100) / epoch["epoch_time_s"]
    return wall - epoch["epoch_time_s"] - epoch["eval_time_s"], rate, rss, wall, epoch
torch = json.loads(open(f"{work}/torch.out").read().strip().splitlines()[-1])
twall, trss = wall_rss("torch")
print()
print(f"{'':22}{'noeira':>10}{'streamed':>10}{'PyTorch':>10}{'ratio':>8}{'streamed':>10}")
held, streamed = noeira("held"), noeira("streamed")
print(f"{'to the first step, s':22}{held[0]:10.2f}{streamed[0]:10.2f}"
      f"{torch['first_step_s']:10.2f}{torch['first_step_s'] / held[0]:8.2f}"
      f"{torch['first_step_s'] / streamed[0]:10.2f}")
print(f"{'samples/s (steady)':22}{held[1]:10.0f}{streamed[1]:10.0f}{torch['samples_per_s']:10.0f}"
      f"{held[1] / torch['samples_per_s']:8.2f}{streamed[1] / torch['samples_per_s']:10.2f}")
print(f"{'peak resident, MB':22}{held[2]:10.0f}{streamed[2]:10.0f}{trss:10.0f}")
print(f"{'wall, s':22}{held[3]:10.1f}{streamed[3]:10.1f}{twall:10.1f}")
print(f"PyTorch waited {1000 * torch['data_s_per_step']:.2f} ms per step for its batch")
if os.path.exists(f"{work}/sgemm.json"):
    b = json.load(open(f"{work}/sgemm.json"))["benchmarks"][0]
    print(f"this machine's OpenBLAS sgemm 1024^3: {b['gflops']:.0f} GFLOP/s")
print(f"noeira test accuracy {100 * held[4]['test_accuracy']:.2f}% (streamed "
      f"{100 * streamed[4]['test_accuracy']:.2f}%)")
PY
