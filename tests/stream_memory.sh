#!/bin/sh
# --stream-data keeps resident memory flat in the size of the data set: one epoch of the mlp on a
# data set 8x larger (HDF5 and .npy alike: 2,500 against 20,000 samples of 784 float32 features,
# 7.8 MB against 63 MB) must peak within 10 % of the small one's resident memory (/usr/bin/time's
# maximum resident set). The check can fail: the large data set held in memory instead must
# peak at least 40 MB above its streamed run.
# Usage: stream_memory.sh NOEIRA WORK_DIR. Exit 77: skipped.
set -eu
noeira=$1 work=$2
python=/usr/bin/python3
if ! "$python" -c 'import numpy, h5py' 2>/dev/null || [ ! -x /usr/bin/time ]; then
  echo "skipped: needs $python with numpy and h5py, and /usr/bin/time"
  exit 77
fi
rm -rf "$work"
mkdir -p "$work"
"$python" - "$work" <<'PY'
import os, sys
import h5py
import numpy as np
work = sys.argv[1]
rng = np.random.default_rng(3)
for name, n in (("small", 2500), ("large", 20000)):
    os.makedirs(f"{work}/{name}")
    for split, rows in (("train", n), ("test", 200)):
        x = rng.normal(0.0, 1.0, (rows, 784)).astype(np.float32)
        y = np.arange(rows) % 10
        with h5py.File(f"{work}/{name}/{split}.h5", "w") as f:
            f["x"], f["y"] = x, y
        np.save(f"{work}/{name}/{split}_x.npy", x)
        np.save(f"{work}/{name}/{split}_y.npy", y)
PY
peak() {  # peak resident kB of one epoch: DATA SIZE [extra flags]
  data=$1 size=$2
  shift 2
  /usr/bin/time -f %M -o "$work/rss" "$noeira" train --data "$data" --data-dir "$work/$size" \
    --model mlp --epochs 1 --batch 100 --threads 1 --log-every 0 --out "$work/run-$data-$size$*" \
    "$@" > /dev/null
  cat "$work/rss"
}
for data in h5 npy; do
  small=$(peak "$data" small --stream-data)
  large=$(peak "$data" large --stream-data)
  held=$(peak "$data" large)
  echo "--data $data: streamed peaks ${small} kB (2,500 samples) and ${large} kB (20,000);" \
       "held, the 20,000 peak ${held} kB"
  "$python" -c "
small, large, held = $small, $large, $held
assert abs(large - small) <= 0.10 * small, f'streamed: {large} kB against {small} kB, past 10 %'
assert held - large >= 40000, f'held {held} kB is not above streamed {large} kB: no measurement'
print(f'--data $data: 8x the data, {100 * (large - small) / small:+.1f} % resident memory')
"
done
