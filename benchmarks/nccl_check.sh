#!/usr/bin/env bash
# The NCCL check, run on a machine with NVIDIA GPUs: builds the NCCL process group's tests
# (tests/dist_nccl_test.cpp) for the GPU's architecture and runs them under mpiexec with one rank,
# then with one rank per GPU when there are two or more (that run includes the NCCL watchdog:
# a rank that skips a collective must end the job, named). Exits non-zero when a test fails or
# skips: on a GPU machine a skip means no usable GPU, which is a failure here, not a pass. With
# one GPU it says what it could not test.
#
#   bash benchmarks/nccl_check.sh           # build dir build-gpu (override with BUILD_DIR=...)
set -euo pipefail
cd "$(dirname "$0")/.."
# A machine without the Debian packages: benchmarks/gpu_deps.sh unpacked them and wrote this.
# shellcheck disable=SC1091
if [ -f .gpu-deps/env.sh ]; then . .gpu-deps/env.sh; fi
build=${BUILD_DIR:-build-gpu}

command -v nvidia-smi >/dev/null || { echo "nccl_check: no NVIDIA driver here" >&2; exit 2; }
gpus=$(nvidia-smi --query-gpu=name --format=csv,noheader | wc -l)
arch=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader | head -n 1 | tr -d ' .')
[[ "$arch" =~ ^[0-9]+$ ]] || arch=90
nvcc=${CUDACXX:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}
read -r -a deps_args <<<"${NOEIRA_CMAKE_ARGS:-}"
# A build dir gpu_check.sh configured (with the NCCL and cuDNN it found) is used as it is;
# configuring it again would only cost time and flip its options.
if [ ! -f "$build/CMakeCache.txt" ]; then
  cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DNOEIRA_CUDA=ON \
        -DNOEIRA_BENCHMARKS=OFF -DCMAKE_CUDA_COMPILER="$nvcc" -DCMAKE_CUDA_ARCHITECTURES="$arch" \
        ${deps_args[@]+"${deps_args[@]}"}
fi
cmake --build "$build" --target dist_nccl_test -j "$(nproc)"

export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_plm=isolated
log="$build/nccl_check.log"
: > "$log"
run() {  # run <ranks>: the DistNccl suite on <ranks> ranks; fails on a failure or a skip
  local status=0
  timeout 240 mpiexec -n "$1" "$build/tests/dist_nccl_test" --gtest_filter='DistNccl.*' \
    --gtest_color=no 2>&1 | tee -a "$log" || status=$?
  if grep -q '^\[  SKIPPED \]' "$log"; then echo "nccl_check: skipped at $1 rank(s)" >&2; exit 3; fi
  [ "$status" -eq 0 ] || { echo "nccl_check: FAILED at $1 rank(s); log in $log" >&2; exit 1; }
}
run 1
if [ "$gpus" -ge 2 ]; then
  run "$gpus"
  # Rank 1 sleeps 60 s past the 1 s timeout: the job must end long before.
  out=$(timeout 45 mpiexec -n 2 "$build/tests/dist_nccl_test" watchdog 1000 1 2>&1 || true)
  echo "$out" | tee -a "$log"
  grep -q 'watchdog: allreduce #2 timed out after 1.0 s; ranks not arrived: 1' <<<"$out" \
    || { echo "nccl_check: the NCCL watchdog did not report rank 1" >&2; exit 1; }
  echo "nccl_check: NCCL tests passed on $gpus GPU(s), sm_$arch"
else
  # One rank moves nothing between GPUs: what matters about NCCL was not tested.
  echo "nccl_check: one rank passed on sm_$arch; NOT TESTED: traffic between GPUs and the NCCL" \
       "watchdog (one GPU here)"
fi
