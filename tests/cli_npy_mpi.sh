#!/bin/sh
# `--data npy` under a real MPI launch. Arrays written by NumPy (Debian's python3-numpy): 10 noisy
# classes of 784 features, as [N, 1, 28, 28] float32 and int64 labels. `mpiexec -n 2 noeira train
# --data npy --policy zero3` must save the parameters of `--sim-ranks 2` bit for bit (h5diff
# without a tolerance compares exactly); its mid-epoch checkpoint, resumed on one rank under DDP,
# must end within the tolerance between world sizes (docs/design.md, "Contracts the tests pin")
# of the uninterrupted two-rank run, read with h5py.
# Usage: cli_npy_mpi.sh MPIEXEC NUMPROC_FLAG NOEIRA H5DIFF WORKDIR. Exit 77: skipped.
set -e
mpiexec=$1 flag=$2 noeira=$3 h5diff=$4 work=$5
python=/usr/bin/python3
if ! "$python" -c 'import numpy, h5py' 2>/dev/null; then
  echo "skipped: $python has no numpy or h5py (python3-numpy, python3-h5py)"
  exit 77
fi
rm -rf "$work"
mkdir -p "$work/data"
"$python" - "$work/data" <<'PY'
import sys
import numpy as np
rng = np.random.default_rng(7)
centers = rng.normal(0.0, 1.0, (10, 784)).astype(np.float32)
for split, n in (("train", 240), ("test", 60)):
    y = np.arange(n) % 10
    x = centers[y] + rng.normal(0.0, 1.0, (n, 784)).astype(np.float32)
    np.save(f"{sys.argv[1]}/{split}_x.npy", x.reshape(n, 1, 28, 28))
    np.save(f"{sys.argv[1]}/{split}_y.npy", y.astype(np.int64))
PY
common="train --data npy --data-dir $work/data --model mlp --epochs 2 --batch 40 --threads 1
        --log-every 3 --watchdog-timeout 60"
"$mpiexec" "$flag" 2 "$noeira" $common --policy zero3 --checkpoint-dir "$work/ckpt" \
  --checkpoint-every 4 --keep-last 0 --out "$work/mpi" </dev/null
"$noeira" $common --policy zero3 --sim-ranks 2 --out "$work/sim" </dev/null
"$h5diff" "$work/mpi/model.h5" "$work/sim/model.h5"
echo "mpi and simulated parameters identical on npy arrays"
"$noeira" $common --policy ddp --resume "$work/ckpt/step-00000004" --out "$work/one" </dev/null
"$python" "$(dirname "$0")/params_within_tolerance.py" "$work/mpi/model.h5" "$work/one/model.h5" \
  "resumed on one rank under ddp"
