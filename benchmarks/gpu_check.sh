#!/usr/bin/env bash
# The GPU check, run on a machine with an NVIDIA GPU (H100/H200): builds noeira with CUDA for the
# GPU's own architecture and runs the CUDA-vs-CPU tests (tests/test_cuda_vs_cpu.cpp). Exits
# non-zero when a test fails, or when the tests skip: on a GPU machine a skip means the runtime
# saw no device, which is a failure here, not a pass. A few minutes on 16 cores.
#
#   bash benchmarks/gpu_check.sh            # build dir build-gpu (override with BUILD_DIR=...)
set -euo pipefail
cd "$(dirname "$0")/.."
build=${BUILD_DIR:-build-gpu}

if ! command -v nvidia-smi >/dev/null; then
  echo "gpu_check: nvidia-smi not found: no NVIDIA driver on this machine" >&2
  exit 2
fi
nvidia-smi --query-gpu=name,driver_version,memory.total,compute_cap --format=csv,noheader
# "9.0" -> "90"; the first GPU decides (the check runs on one).
arch=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader | head -n 1 | tr -d ' .')
if [[ ! "$arch" =~ ^[0-9]+$ ]]; then
  echo "gpu_check: could not read the compute capability (got '$arch'); using 90" >&2
  arch=90
fi

nvcc=${CUDACXX:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DNOEIRA_CUDA=ON \
      -DNOEIRA_BENCHMARKS=OFF -DCMAKE_CUDA_COMPILER="$nvcc" -DCMAKE_CUDA_ARCHITECTURES="$arch"
cmake --build "$build" --target noeira_tests -j "$(nproc)"

log="$build/gpu_check.log"
status=0
# The gtest binary directly (ctest -R Cuda would start one process per test).
"$build/tests/noeira_tests" --gtest_filter='CudaVsCpu.*:CudaModule.*' --gtest_color=no \
  2>&1 | tee "$log" || status=$?
if grep -q '^\[  SKIPPED \]' "$log"; then
  echo "gpu_check: CUDA tests were skipped: the CUDA runtime found no usable GPU" >&2
  exit 3
fi
if ! grep -q '^\[  PASSED  \] [1-9]' "$log"; then
  echo "gpu_check: no CUDA test passed" >&2
  [ "$status" -ne 0 ] || status=1
fi
if [ "$status" -ne 0 ]; then
  echo "gpu_check: FAILED (exit $status); log in $log" >&2
  exit "$status"
fi
echo "gpu_check: all CUDA tests passed on sm_$arch"
