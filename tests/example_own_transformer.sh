#!/bin/sh
# examples/own_transformer, a transformer language model of the program's own design over
# noeira's command line, built against the installed package, trained on a text of its own (this
# repository's README): `mpiexec -n 2 app train --policy zero3` must save the parameters of
# `--sim-ranks 2` bit for bit (h5diff); the validation loss must fall from the first evaluation to
# the last and start below ln 256 (better than uniform over the ids); eval, without --data (the
# model's own default, text), must report the run's last validation loss; and generate must
# continue a prompt with the model (no generation path of its own needed).
# Usage: example_own_transformer.sh CMAKE GENERATOR C_COMPILER CXX_COMPILER PREFIX SOURCE_DIR
#        MPIEXEC NUMPROC_FLAG H5DIFF WORK_DIR. Exit 77: skipped.
set -eu
cmake=$1 generator=$2 cc=$3 cxx=$4 prefix=$5 source=$6 mpiexec=$7 flag=$8 h5diff=$9
work=${10}
python=/usr/bin/python3
rm -rf "$work"
sh "$source/tests/build_example.sh" "$cmake" "$generator" "$cc" "$cxx" "$prefix" \
  "$source/examples/own_transformer" "$work"
app=$work/build/own_transformer
text=$source/README.md
common="train --text-file $text --steps 60 --eval-every 30 --threads 1 --log-every 20
        --watchdog-timeout 60 --policy zero3"
"$mpiexec" "$flag" 2 "$app" $common --out "$work/mpi" </dev/null
"$app" $common --sim-ranks 2 --out "$work/sim" </dev/null
"$h5diff" "$work/mpi/model.h5" "$work/sim/model.h5"
echo "mpi and simulated parameters identical"
"$app" eval --params "$work/mpi/model.h5" --text-file "$text" --log-format json > "$work/eval.json"
"$python" - "$work/mpi/metrics.jsonl" "$work/eval.json" <<'PY'
import json, math, sys
evals = [r for r in map(json.loads, open(sys.argv[1])) if "val_loss" in r]
first, last = evals[0]["val_loss"], evals[-1]["val_loss"]
assert first < math.log(256) and last < first, (first, last)
r = json.load(open(sys.argv[2]))
assert abs(r["val_loss"] - last) <= 1e-4 * last, (r, last)
print(f"validation loss {first:.3f} -> {last:.3f}; eval agrees")
PY
out=$("$app" generate --params "$work/mpi/model.h5" --prompt "The " --tokens 40)
[ "$(printf '%s' "$out" | wc -c)" -ge 44 ] && [ "${out#The }" != "$out" ] ||
  { echo "FAILED: generate wrote '$out'"; exit 1; }
echo "example_own_transformer: passed"
