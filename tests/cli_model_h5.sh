#!/bin/sh
# model.h5 describes itself (train/model_description.hpp): examples/read_model_h5.py, with h5py
# and numpy and no noeira code, prepares the test images from the file's attributes alone and
# gets the accuracy `noeira eval` reports. It also checks the attributes of a CNN's and a GPT's
# file, and the metadata of a safetensors export. Usage: cli_model_h5.sh NOEIRA PYTHON EXAMPLE WORKDIR. Exit 77: skipped.
set -e
noeira=$1 python=$2 example=$3 work=$4
. "$(dirname "$0")/fashion_mnist_work.sh"
"$python" -c "import h5py, numpy" 2>/dev/null || { echo "skipped: no h5py or numpy"; exit 77; }
field() { sed "s/.*\"$1\":\([^,}]*\).*/\1/"; }

"$noeira" train --model mlp --limit-train 2000 --limit-test 500 --epochs 1 --threads 1 \
  --log-every 0 --out "$work/mlp" </dev/null >/dev/null
want=$("$noeira" eval --params "$work/mlp/model.h5" --limit-test 500 --log-format json \
  </dev/null | field test_accuracy)
got=$("$python" "$example" "$work/mlp/model.h5" --limit 500)
echo "noeira eval: $want; $got"
# float32 sums in another order may move a sample sitting on a tie: one in 500 at most.
echo "$got" | awk -v want="$want" '{ d = $2 - want; if (d < 0) d = -d; exit !(d <= 0.002) }' ||
  { echo "FAIL: the h5py reader's accuracy differs from noeira eval's"; exit 1; }
echo "$got" | grep -q "labels: T-shirt/top, Trouser, Pullover" ||
  { echo "FAIL: no Fashion-MNIST label names"; exit 1; }
raw=$("$python" "$example" "$work/mlp/model.h5" --limit 500 --raw)
echo "without the stored normalization: $raw"

# An export carries the same description in its safetensors metadata.
"$noeira" export --params "$work/mlp/model.h5" --format safetensors --names pytorch \
  -o "$work/mlp.safetensors" </dev/null >/dev/null
"$python" - "$work/mlp.safetensors" <<'PY' || { echo "FAIL: the export lacks the description"; exit 1; }
import json, struct, sys
with open(sys.argv[1], "rb") as f:
    meta = json.loads(f.read(struct.unpack("<Q", f.read(8))[0]))["__metadata__"]
assert json.loads(meta["input_mean"]) == [0.286], meta
assert json.loads(meta["labels"])[0] == "T-shirt/top", meta
assert meta["data"] == "fashion-mnist" and meta["model"] == "mlp", meta
PY
echo "the safetensors export carries the same description"

attributes() {
  "$python" - "$1" <<'PY'
import sys, h5py
with h5py.File(sys.argv[1], "r") as f:
    for k, v in sorted(f.attrs.items()):
        print("%s=%s" % (k, v.decode() if isinstance(v, bytes) else v))
PY
}
expect() {
  grep -qxF "$2" "$1" || { echo "FAIL: $1 lacks the attribute $2"; cat "$1"; exit 1; }
}
"$noeira" train --model cnn --limit-train 100 --limit-test 100 --epochs 1 --threads 1 \
  --log-every 0 --out "$work/cnn" </dev/null >/dev/null
attributes "$work/cnn/model.h5" >"$work/cnn.attrs"
expect "$work/cnn.attrs" "input_shape=[1,28,28]"
expect "$work/cnn.attrs" "input_mean=[0.286]"
expect "$work/cnn.attrs" "input_std=[0.353]"
expect "$work/cnn.attrs" "data=fashion-mnist"
expect "$work/cnn.attrs" "parameters=421738"

for i in 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16; do
  echo "to be or not to be, that is the question $i"
done >"$work/corpus.txt"
"$noeira" train --model gpt-tiny --data text --text-file "$work/corpus.txt" --steps 2 \
  --eval-every 2 --eval-batches 1 --batch 2 --threads 1 --out "$work/gpt" </dev/null >/dev/null
attributes "$work/gpt/model.h5" >"$work/gpt.attrs"
expect "$work/gpt.attrs" "tokenizer=char"
expect "$work/gpt.attrs" "block=16"
expect "$work/gpt.attrs" "data=text"
grep -q "^vocabulary=" "$work/gpt.attrs" || { echo "FAIL: no vocabulary"; exit 1; }
echo "model.h5 describes its inputs and outputs"
