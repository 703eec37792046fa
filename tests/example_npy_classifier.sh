#!/bin/sh
# examples/npy_classifier, a program of its own model over noeira's command line, built against
# the package that package_example installed (find_package(noeira), <noeira/noeira.hpp>), on
# arrays NumPy writes: `mpiexec -n 2 app train --policy zero3 --checkpoint-dir ck` must save the
# parameters of `--sim-ranks 2` bit for bit (h5diff compares exactly); its mid-run checkpoint,
# resumed on one rank under DDP, must end within the tolerance between world sizes of the
# uninterrupted run; eval and export work under the model's own name, which learned the classes;
# and its command line knows its model, not noeira's presets.
# Usage: example_npy_classifier.sh CMAKE GENERATOR C_COMPILER CXX_COMPILER PREFIX SOURCE_DIR
#        MPIEXEC NUMPROC_FLAG H5DIFF WORK_DIR. Exit 77: skipped.
set -eu
cmake=$1 generator=$2 cc=$3 cxx=$4 prefix=$5 source=$6 mpiexec=$7 flag=$8 h5diff=$9
work=${10}
python=/usr/bin/python3
if ! "$python" -c 'import numpy, h5py' 2>/dev/null; then
  echo "skipped: $python has no numpy or h5py (python3-numpy, python3-h5py)"
  exit 77
fi
rm -rf "$work"
mkdir -p "$work/data"
sh "$source/tests/build_example.sh" "$cmake" "$generator" "$cc" "$cxx" "$prefix" \
  "$source/examples/npy_classifier" "$work"
app=$work/build/npy_classifier

"$python" - "$work/data" <<'PY'
import sys
import numpy as np
rng = np.random.default_rng(11)
centers = rng.normal(0.0, 1.0, (5, 32)).astype(np.float32)
for split, n in (("train", 320), ("test", 100)):
    y = np.arange(n) % 5
    x = centers[y] + 0.7 * rng.normal(0.0, 1.0, (n, 32)).astype(np.float32)
    np.save(f"{sys.argv[1]}/{split}_x.npy", x)
    np.save(f"{sys.argv[1]}/{split}_y.npy", y.astype(np.int32))
PY

common="train --data-dir $work/data --epochs 2 --threads 1 --log-every 4 --watchdog-timeout 60"
"$mpiexec" "$flag" 2 "$app" $common --policy zero3 --checkpoint-dir "$work/ckpt" \
  --checkpoint-every 4 --keep-last 0 --out "$work/mpi" </dev/null
"$app" $common --policy zero3 --sim-ranks 2 --out "$work/sim" </dev/null
"$h5diff" "$work/mpi/model.h5" "$work/sim/model.h5"
echo "mpi and simulated parameters identical"
"$app" $common --policy ddp --resume "$work/ckpt/step-00000004" --out "$work/one" </dev/null
"$python" "$source/tests/params_within_tolerance.py" "$work/mpi/model.h5" "$work/one/model.h5" \
  "resumed on one rank under ddp"

"$app" eval --params "$work/mpi/model.h5" --data-dir "$work/data" --log-format json \
  > "$work/eval.json"
"$python" - "$work/eval.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
assert r["test_samples"] == 100 and r["test_accuracy"] > 0.9, r
print(f"eval: test accuracy {r['test_accuracy']:.2f} of the model's own name")
PY
"$app" export --params "$work/mpi/model.h5" -o "$work/classifier.safetensors" | grep -q \
  "exported classifier" || { echo "FAILED: export"; exit 1; }

"$app" train --help > "$work/help.txt"
grep -q "classifier: 32 features" "$work/help.txt" || { echo "FAILED: --help"; exit 1; }
if "$app" train --model mlp --data-dir "$work/data" 2> "$work/mlp.err"; then
  echo "FAILED: the program trained a preset it does not hold"
  exit 1
fi
grep -q "^npy_classifier: error: unknown model 'mlp', expected one of: classifier" \
  "$work/mlp.err" || { echo "FAILED: $(cat "$work/mlp.err")"; exit 1; }
echo "example_npy_classifier: passed"
