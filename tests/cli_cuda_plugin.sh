#!/bin/sh
# The CUDA backend is a plugin (kernels/cuda_plugin.hpp): a CPU run maps no CUDA library, in any
# build; --device cuda loads the plugin, and a missing or foreign plugin is a one-line error.
#  - the binary links no CUDA, cuDNN or NCCL library (ldd);
#  - a CPU run opens none of them, nor the plugin (the dynamic loader's own log, LD_DEBUG=files);
#  - in a CUDA build, --device cuda opens the plugin: it trains on a GPU, or says the CUDA runtime
#    finds none; NOEIRA_CUDA_PLUGIN naming a missing file, or a plugin of another build (the
#    plugin's build id changed in a copy), fails in one line that names the file;
#  - in a build without CUDA, --device cuda says so.
# Usage: cli_cuda_plugin.sh NOEIRA PLUGIN WORKDIR (PLUGIN empty in a build without CUDA).
# Exit 77: skipped.
set -e
noeira=$1 plugin=$2 work=$3
if [ ! -d /usr/share/datasets/fashion-mnist ]; then
  echo "skipped: no fashion-mnist (apt-get install dataset-fashion-mnist)"
  exit 77
fi
rm -rf "$work"
mkdir -p "$work"
cuda_libraries='lib(cuda|cudart|cublas|cublasLt|cudnn[a-z_]*|nccl|noeira_cuda)\.so'
run="train --model mlp --epochs 1 --limit-train 64 --limit-test 64 --batch 32 --threads 1
     --log-every 0"

if ldd "$noeira" | grep -E "$cuda_libraries"; then
  echo "FAIL: the binary links the CUDA libraries above"
  exit 1
fi

LD_DEBUG=files "$noeira" $run --out "$work/cpu" </dev/null >"$work/cpu.log" 2>"$work/cpu.ld"
if grep -E "file=[^ ]*$cuda_libraries" "$work/cpu.ld"; then
  echo "FAIL: a CPU run opened the libraries above"
  exit 1
fi
grep -q "file=" "$work/cpu.ld" || { echo "FAIL: LD_DEBUG=files logged nothing"; exit 1; }
echo "a CPU run opens no CUDA library"

# $1: what the run's error must say; the rest: the environment of the run.
expect_cuda_error() {
  expected=$1
  shift
  if env "$@" "$noeira" $run --device cuda --out "$work/bad" </dev/null >"$work/bad.log" 2>&1; then
    echo "FAIL: --device cuda with $* succeeded"
    exit 1
  fi
  grep -q "^noeira: error: --device cuda: .*$expected" "$work/bad.log" ||
    { echo "FAIL: --device cuda with $*: no one-line error saying '$expected':"; cat "$work/bad.log"; exit 1; }
  echo "with $*: $(grep '^noeira: error' "$work/bad.log")"
}

if [ -z "$plugin" ]; then
  expect_cuda_error "built without CUDA" NOTHING=0
  exit 0
fi

if LD_DEBUG=files "$noeira" $run --device cuda --out "$work/cuda" </dev/null \
     >"$work/cuda.log" 2>"$work/cuda.ld"; then
  echo "--device cuda trained on a GPU"
else
  grep -q "^noeira: error: --device cuda: the CUDA runtime finds no GPU" "$work/cuda.ld" ||
    { echo "FAIL: --device cuda without a GPU:"; grep -v "^ *[0-9]*:" "$work/cuda.ld"; exit 1; }
  echo "--device cuda here: $(grep '^noeira: error' "$work/cuda.ld")"
fi
grep -q "file=[^ ]*libnoeira_cuda\.so" "$work/cuda.ld" ||
  { echo "FAIL: --device cuda did not open the plugin"; exit 1; }

expect_cuda_error "missing.so: .*NOEIRA_CUDA_PLUGIN names" NOEIRA_CUDA_PLUGIN="$work/missing.so"

# The same plugin with another build id (same length, so the file stays valid).
/usr/bin/python3 - "$plugin" "$work/foreign.so" <<'PY'
import re, sys
data = open(sys.argv[1], "rb").read()
ids = set(re.findall(rb"\d+\.\d+\.\d+-[0-9A-Za-z]{16}", data))
assert len(ids) == 1, f"expected one build id in the plugin, found {ids}"
build_id = ids.pop()
foreign = build_id[:-16] + bytes(ord("A") if c != ord("A") else ord("B") for c in build_id[-16:])
open(sys.argv[2], "wb").write(data.replace(build_id, foreign))
PY
expect_cuda_error "foreign.so: from another build of noeira" NOEIRA_CUDA_PLUGIN="$work/foreign.so"
