#!/usr/bin/env bash
# The GPU check, in two commands that each fit one call of a lent GPU machine (at most 600 s; each
# phase stops itself at 540 s, GPU_CHECK_SECONDS to change):
#
#   bash benchmarks/gpu_check.sh build   # 1: unpack the carried dependencies, configure, build only
#                                        #    what the checks run, print every kernel's registers
#   bash benchmarks/gpu_check.sh run     # 2: the checks, most valuable first (gpu_check_steps.sh),
#                                        #    each with its own timeout, the logs into $OUT after each
#   bash benchmarks/gpu_check.sh         # both, one after the other (a machine without a window)
#
# The first command is useful alone: it proves the CUDA build on the GPU's own toolkit and prints
# the register table. The second needs the first's build directory (build-gpu, BUILD_DIR=...) on
# the same machine: with the device tool, send it within the 30 s the machine stays warm, and do
# not carry .gpu-deps with it (a carried path replaces what the first command wrote there).
# Without a GPU (a rehearsal) the build runs for sm_90 and every GPU step says why it skipped;
# the exit status is then 2: nothing was checked.
#
# Carry for the first command (made here by `bash benchmarks/gpu_deps.sh fetch`):
#   .gpu-deps/debs, .gpu-deps/fashion-mnist
set -euo pipefail
cd "$(dirname "$0")/.."
phase=${1:-all}
case $phase in
  build | run | all) ;;
  *) echo "usage: $0 [build | run]" >&2; exit 2 ;;
esac
build=${BUILD_DIR:-build-gpu}
window_s=${GPU_CHECK_SECONDS:-540}
phase_start=$SECONDS
deadline=$((SECONDS + window_s))
failures=()
fail() { echo "gpu_check: $*" >&2; failures+=("$*"); }
note() { echo "gpu_check: $*"; }
left() { echo $((deadline - SECONDS)); }

# The logs, packed into $OUT after every step when the device tool runs the check (only files
# under $OUT come back, and a command killed at its time limit prints no summary).
save_logs() {
  if [ -n "${OUT:-}" ] && [ -d "$build" ] && compgen -G "$build/*.log" >/dev/null; then
    (cd "$build" && tar czf "$OUT/gpu_check_logs.tgz" ./*.log) 2>/dev/null || true
  fi
}

# Where a GPU is, its name and architecture; without one (a rehearsal), sm_90: the lent machines'.
have_gpu=0
gpu="none (nvidia-smi not found)"
arch=90
if command -v nvidia-smi >/dev/null &&
   gpu=$(nvidia-smi --query-gpu=name,driver_version,memory.total,compute_cap --format=csv,noheader \
         2>&1 | head -n 1) && [ -n "$gpu" ] && [[ $gpu != *[Ff]ailed* ]]; then
  have_gpu=1
  arch=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader | head -n 1 | tr -d ' .')
  if [[ ! "$arch" =~ ^[0-9]+$ ]]; then
    note "could not read the compute capability (got '$arch'); using 90"
    arch=90
  fi
fi
note "GPU: $gpu (building for sm_$arch)"

# --- the dependencies -----------------------------------------------------------------------------
# Unpacked once per machine from the carried .debs (benchmarks/gpu_deps.sh); env.sh points PATH,
# the libraries and CMake at them, and sets DATA_DIR / TEXT_DIR.
deps() {
  # shellcheck disable=SC1091  # written by gpu_deps.sh unpack
  if [ -d .gpu-deps/debs ] && ! (. .gpu-deps/env.sh >/dev/null 2>&1); then
    local t=$SECONDS
    bash benchmarks/gpu_deps.sh unpack "${GPU_DEPS_PREFIX:-/opt/noeira-deps}"
    note "dependencies unpacked in $((SECONDS - t)) s"
  fi
  # shellcheck disable=SC1091
  if [ -f .gpu-deps/env.sh ]; then . .gpu-deps/env.sh; fi
  # mpiexec and an MPI singleton start Open MPI's daemon without ssh or rsh (a device image has
  # neither; ctest's and the NCCL check's runs are all on this one machine).
  export OMPI_MCA_plm=isolated OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
}

# NCCL and cuDNN: the CUDA toolkit's when it has them, else the nvidia-nccl / nvidia-cudnn wheels
# of the image's PyTorch (headers and libraries under site-packages/nvidia/<name>). Appends the
# CMake hints to deps_args and the library folders to LD_LIBRARY_PATH.
wheel_library() {  # wheel_library <module> <header> <lib glob> <cmake variable prefix>
  local module=$1 header=$2 glob=$3 var=$4 dir lib
  if [ -f "$cuda_root/include/$header" ] || [ -f "/usr/include/$header" ]; then return; fi
  dir=$(python3 -c "import importlib.util as u; s = u.find_spec('nvidia.$module'); print(list(s.submodule_search_locations)[0])" 2>/dev/null || true)
  lib=$(compgen -G "$dir/lib/$glob" | head -n 1 || true)
  if [ -n "$dir" ] && [ -f "$dir/include/$header" ] && [ -n "$lib" ]; then
    note "$module from $dir"
    deps_args+=("-D${var}_INCLUDE=$dir/include" "-D${var}_LIBRARY=$lib")
    export LD_LIBRARY_PATH="$dir/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  else
    note "no $header beside the CUDA toolkit nor an nvidia-$module wheel; cmake will say"
  fi
}

# What the run phase needs to find the wheels' libraries again, written by the build phase.
runtime_env=$build/gpu_check_env.sh

# --- command 1: the build -------------------------------------------------------------------------
targets=(noeira noeira_cuda noeira_tests bench_gpu_throughput dist_nccl_test)
build_phase() {
  deps
  nvcc=${CUDACXX:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}
  [ -x "$nvcc" ] || { echo "gpu_check: no nvcc (looked for $nvcc)" >&2; exit 1; }
  cuda_root=$(dirname "$(dirname "$(readlink -f "$nvcc")")")
  deps_args=()
  read -r -a deps_args <<<"${NOEIRA_CMAKE_ARGS:-}"
  wheel_library nccl nccl.h 'libnccl.so*' NOEIRA_NCCL
  wheel_library cudnn cudnn.h 'libcudnn.so*' NOEIRA_CUDNN
  mkdir -p "$build"
  echo "export LD_LIBRARY_PATH=\"${LD_LIBRARY_PATH:-}\"" >"$runtime_env"
  local t=$SECONDS
  timeout "$(left)" cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DNOEIRA_CUDA=ON \
    -DNOEIRA_BENCHMARKS=ON -DCMAKE_CUDA_COMPILER="$nvcc" -DCMAKE_CUDA_ARCHITECTURES="$arch" \
    -DCMAKE_CUDA_FLAGS=-Xptxas=-v ${deps_args[@]+"${deps_args[@]}"} >"$build/configure.log" 2>&1 ||
    { tail -n 30 "$build/configure.log" >&2; save_logs; echo "gpu_check: configure FAILED" >&2; exit 1; }
  note "configured in $((SECONDS - t)) s"
  t=$SECONDS
  # 30 s are kept for the register table and the summary.
  local status=0
  timeout $(($(left) - 30)) cmake --build "$build" -j "$(nproc)" --target "${targets[@]}" \
    >"$build/build.log" 2>&1 || status=$?
  local build_s=$((SECONDS - t))
  save_logs
  if [ "$status" -ne 0 ]; then
    grep -E 'error|FAILED' "$build/build.log" | head -n 20 >&2 || true
    [ "$status" -eq 124 ] && echo "gpu_check: the build did not finish in the window ($build_s s)" >&2
    echo "gpu_check: the build FAILED (log in $build/build.log); nothing can run" >&2
    exit 1
  fi
  note "built ${targets[*]} in $build_s s on $(nproc) cores"
  local plugin
  plugin=$(find "$build" -maxdepth 2 -name 'libnoeira_cuda*.so' | head -n 1)
  # cuobjdump reads the plugin; a toolkit without it (nvcc and ptxas only) leaves ptxas's own
  # report in the build log (-Xptxas=-v above), complete when the build was.
  local registers=0 source=("$plugin")
  command -v cuobjdump >/dev/null || [ -x /usr/local/cuda/bin/cuobjdump ] ||
    source=(--ptxas-log "$build/build.log")
  bash benchmarks/cuda_registers.sh "${source[@]}" >"$build/registers.log" 2>&1 || registers=$?
  cat "$build/registers.log"
  case $registers in
    0) ;;
    2) note "register table not read: $(tail -n 1 "$build/registers.log")" ;;
    *) fail "register usage: a kernel spills or needs more registers than its launch allows" ;;
  esac
  echo "$build_s" >"$build/gpu_check_build_seconds"
  save_logs
}

# --- command 2: the checks ------------------------------------------------------------------------
run_phase() {
  deps
  if [ ! -x "$build/noeira" ] || [ ! -f "$build/gpu_check_build_seconds" ]; then
    echo "gpu_check: no finished build in $build: run 'gpu_check.sh build' first (on the same" \
         "machine: a machine given back loses it)" >&2
    exit 1
  fi
  # shellcheck disable=SC1090
  . "$runtime_env"
  # shellcheck source=benchmarks/gpu_check_steps.sh
  . benchmarks/gpu_check_steps.sh
  run_steps
}

if [ "$phase" = build ] || [ "$phase" = all ]; then
  build_phase
  note "build phase: $((SECONDS - phase_start)) s of its $window_s"
fi
if [ "$phase" = run ] || [ "$phase" = all ]; then
  phase_start=$SECONDS
  deadline=$((SECONDS + window_s))
  run_phase
fi
if [ "${#failures[@]}" -gt 0 ]; then
  echo "gpu_check: FAILED:"
  printf '  - %s\n' "${failures[@]}"
  exit 1
fi
if [ "$have_gpu" -eq 0 ]; then
  note "no GPU here: the build was rehearsed, nothing was checked"
  exit 2
fi
