#!/usr/bin/env bash
# The GPU check, run on a machine with an NVIDIA GPU (H100/H200): builds noeira with CUDA for the
# GPU's own architecture, then
#   1. runs every GPU test of the gtest binary (filter '*Cuda*': CudaVsCpu, CudaAttention,
#      CudaConv, CudaPool, CudaRecurrent, CudaModule, CudaTraining, CudaSim, CudaGatherPixels,
#      CudaCheckpointed, CudaBf16, CudaBf16Activations, CudaMixedParams, CudaBf16Gradients,
#      CudaSharedVjpBuffers...),
#      failing when one skips: on a GPU machine a skip means the runtime saw no device, which is
#      a failure here, not a pass;
#   2. runs the training throughput benchmark (benchmarks/bench_gpu_throughput.cpp: the `mlp`
#      preset at batch 100 and a 4096-wide MLP at batch 1024; samples/s, TFLOP/s and % of the
#      GPU's peak), with TF32 off and then on;
#   3. trains the mlp preset on Fashion-MNIST for one epoch on the GPU, on one rank (fp32, and
#      with --precision bf16) and on two simulated ranks (ZeRO-3; ZeRO-2 with bf16 reductions;
#      DDP with bf16 products, gradients and reductions), and reads samples/s and test accuracy
#      from the output;
#   3b. trains gpt-char on the fortunes corpus for 300 steps on the GPU (validation loss must
#      fall below 3) and generates from it;
#   4. runs the NCCL process group's tests (benchmarks/nccl_check.sh, same build dir);
# and prints a summary block of the figures. Every step runs even when an earlier one failed (a
# GPU hour is scarce: one run gives every figure); the exit status is non-zero when any failed.
# Budget: 8 minutes on a 16-core H100/H200 machine, most of it the build.
#
#   bash benchmarks/gpu_check.sh            # build dir build-gpu (override with BUILD_DIR=...)
#   DATA_DIR=/path/to/fashion-mnist bash benchmarks/gpu_check.sh   # where Debian's is missing
set -euo pipefail
cd "$(dirname "$0")/.."
# Libraries the GPU machine may lack (MPI, HDF5, OpenBLAS, gtest, ...): benchmarks/gpu_deps.sh
# provides them and writes this file (PATH, NOEIRA_CMAKE_ARGS, DATA_DIR, ...).
# shellcheck disable=SC1091
if [ -f .gpu-deps/env.sh ]; then . .gpu-deps/env.sh; fi
build=${BUILD_DIR:-build-gpu}
budget_s=480
started=$SECONDS
failures=()
fail() { echo "gpu_check: $*" >&2; failures+=("$*"); }
# The logs, packed after every step into $OUT when the device tool runs the check (only files
# under $OUT come back, and a command killed at its time limit prints no summary).
save_logs() {
  if [ -n "${OUT:-}" ] && compgen -G "$build/*.log" >/dev/null; then
    (cd "$build" && tar czf "$OUT/gpu_check_logs.tgz" ./*.log) 2>/dev/null || true
  fi
}

if ! command -v nvidia-smi >/dev/null; then
  echo "gpu_check: nvidia-smi not found: no NVIDIA driver on this machine" >&2
  exit 2
fi
gpu=$(nvidia-smi --query-gpu=name,driver_version,memory.total,compute_cap --format=csv,noheader \
      | head -n 1)
echo "gpu_check: $gpu"
# "9.0" -> "90"; the first GPU decides (the check runs on one).
arch=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader | head -n 1 | tr -d ' .')
if [[ ! "$arch" =~ ^[0-9]+$ ]]; then
  echo "gpu_check: could not read the compute capability (got '$arch'); using 90" >&2
  arch=90
fi

# The trainings need Fashion-MNIST: DATA_DIR, else Debian's dataset-fashion-mnist. Checked now so
# that a missing data set is said before the build, not after it.
data_flags=()
data_dir=/usr/share/datasets/fashion-mnist
if [ -n "${DATA_DIR:-}" ]; then
  data_dir=$DATA_DIR
  data_flags=(--data-dir "$DATA_DIR")
fi
have_data=0
if compgen -G "$data_dir/train-images-idx3-ubyte*" >/dev/null; then have_data=1; fi
if [ "$have_data" -eq 0 ]; then
  echo "gpu_check: no Fashion-MNIST in $data_dir (set DATA_DIR): the trainings will not run" >&2
fi

# --- build: only what the check runs -------------------------------------------------------------
nvcc=${CUDACXX:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}
build_start=$SECONDS
# gpu_deps.sh's hints (one string, split on white space) point CMake at the unpacked libraries.
read -r -a deps_args <<<"${NOEIRA_CMAKE_ARGS:-}"
# NCCL: the CUDA toolkit's when it has one, else the nvidia-nccl wheel PyTorch's images carry
# (headers and libnccl.so.2 under site-packages/nvidia/nccl).
cuda_root=$(dirname "$(dirname "$(readlink -f "$nvcc")")")
if [ ! -f "$cuda_root/include/nccl.h" ] && [ ! -f /usr/include/nccl.h ]; then
  nccl_dir=$(python3 -c 'import importlib.util as u; s = u.find_spec("nvidia.nccl"); print(list(s.submodule_search_locations)[0])' 2>/dev/null || true)
  nccl_lib=$(compgen -G "$nccl_dir/lib/libnccl.so*" | head -n 1 || true)
  if [ -n "$nccl_dir" ] && [ -f "$nccl_dir/include/nccl.h" ] && [ -n "$nccl_lib" ]; then
    echo "gpu_check: NCCL from $nccl_dir"
    deps_args+=("-DNOEIRA_NCCL_INCLUDE=$nccl_dir/include" "-DNOEIRA_NCCL_LIBRARY=$nccl_lib")
    export LD_LIBRARY_PATH="$nccl_dir/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  else
    echo "gpu_check: no nccl.h beside the CUDA toolkit nor an nvidia-nccl wheel; cmake will say" >&2
  fi
fi
# cuDNN (the convolutions) likewise: the toolkit's, else the nvidia-cudnn wheel (headers and
# libcudnn.so.9, which loads its engine libraries from beside itself).
if [ ! -f "$cuda_root/include/cudnn.h" ] && [ ! -f /usr/include/cudnn.h ]; then
  cudnn_dir=$(python3 -c 'import importlib.util as u; s = u.find_spec("nvidia.cudnn"); print(list(s.submodule_search_locations)[0])' 2>/dev/null || true)
  cudnn_lib=$(compgen -G "$cudnn_dir/lib/libcudnn.so*" | head -n 1 || true)
  if [ -n "$cudnn_dir" ] && [ -f "$cudnn_dir/include/cudnn.h" ] && [ -n "$cudnn_lib" ]; then
    echo "gpu_check: cuDNN from $cudnn_dir"
    deps_args+=("-DNOEIRA_CUDNN_INCLUDE=$cudnn_dir/include" "-DNOEIRA_CUDNN_LIBRARY=$cudnn_lib")
    export LD_LIBRARY_PATH="$cudnn_dir/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  else
    echo "gpu_check: no cudnn.h beside the CUDA toolkit nor an nvidia-cudnn wheel; cmake will say" >&2
  fi
fi
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DNOEIRA_CUDA=ON \
      -DNOEIRA_BENCHMARKS=ON -DCMAKE_CUDA_COMPILER="$nvcc" -DCMAKE_CUDA_ARCHITECTURES="$arch" \
      ${deps_args[@]+"${deps_args[@]}"}
if ! cmake --build "$build" -j "$(nproc)" \
       --target noeira_tests noeira bench_gpu_throughput dist_nccl_test; then
  echo "gpu_check: the build FAILED (above); nothing can run" >&2
  exit 1
fi
build_s=$((SECONDS - build_start))

# --- 1. the GPU tests ----------------------------------------------------------------------------
# The gtest binary directly (ctest -R would start one process per test). Every GPU test has Cuda
# in its suite name; the list shows what the filter caught. A test that can only run without a
# GPU (a refusal of --device cuda) skips here saying "a GPU is present": that skip is expected;
# any other skip is a failure, and "no CUDA device" ends the check (nothing else can run).
filter='*Cuda*'
listed=$("$build/tests/noeira_tests" --gtest_list_tests --gtest_filter="$filter")
test_count=$(grep -c '^  ' <<<"$listed" || true)
suites=$(grep -E '^[^ ].*\.$' <<<"$listed" | tr -d '.' | tr '\n' ' ' || true)
echo "gpu_check: $test_count GPU tests in suites: $suites"
if [ "$test_count" -eq 0 ]; then
  echo "gpu_check: the filter '$filter' matches no test" >&2
  exit 1
fi
# CliCuda's GPU run reads Fashion-MNIST from here.
if [ -n "${DATA_DIR:-}" ]; then export NOEIRA_FASHION_MNIST_DIR=$DATA_DIR; fi
log="$build/gpu_check.log"
status=0
# A hang ends here, not at the device's time limit, which would also lose the summary.
timeout 300 "$build/tests/noeira_tests" --gtest_filter="$filter" --gtest_color=no 2>&1 \
  | tee "$log" || status=$?
save_logs
if [ "$status" -eq 124 ]; then fail "GPU tests did not finish in 300 s; log in $log"; fi
# "<name>: <reason>" of every skipped test: gtest prints "file:line: Skipped", then the reason,
# then "[  SKIPPED ] Suite.Name (N ms)".
skips=$(awk '/^\[ RUN      \]/ { reason = "" }
             /: Skipped$/ { getline reason }
             /^\[  SKIPPED \] .* \([0-9]+ ms\)$/ { print $4 ": " reason }' "$log")
expected_skips=$(grep -c ': a GPU is present' <<<"$skips" || true)
unexpected=$(grep -v ': a GPU is present' <<<"$skips" || true)
if [ -n "$unexpected" ]; then
  echo "gpu_check: GPU tests skipped (on a GPU machine a skip is a failure):" >&2
  while IFS= read -r line; do echo "  $line"; done <<<"$unexpected" >&2
  if grep -q 'no CUDA device' <<<"$unexpected"; then
    echo "gpu_check: CUDA is unavailable to noeira (why: the skip reasons above)" >&2
    exit 3
  fi
  fail "$(grep -c . <<<"$unexpected") GPU tests skipped; log in $log"
fi
tests_passed=$(sed -n 's/^\[  PASSED  \] \([0-9][0-9]*\) test.*/\1/p' "$log" | tail -n 1)
if [ -z "$tests_passed" ] || [ "$tests_passed" -eq 0 ]; then
  fail "no GPU test passed"
elif [ "$status" -ne 0 ]; then
  fail "GPU tests FAILED (exit $status); log in $log"
fi
tests_summary="${tests_passed:-0} of $test_count passed, $expected_skips skipped as expected"
if [ "$status" -ne 0 ]; then
  tests_summary+=", FAILED: $(sed -n 's/^\[  FAILED  \] \([A-Za-z0-9_/]*\.[A-Za-z0-9_/]*\).*/\1/p' \
                             "$log" | sort -u | tr '\n' ' ')"
fi

# --- 2. the throughput benchmark -----------------------------------------------------------------
bench() {  # bench <label> [flags...]: runs it, keeps its output in $build/bench_<label>.log
  local label=$1 out="$build/bench_$1.log" status=0
  shift
  timeout 120 "$build/benchmarks/bench_gpu_throughput" --device cuda "$@" 2>&1 | tee "$out" \
    || status=$?
  save_logs
  if grep -q '^bench_gpu_throughput: skipped' "$out"; then
    fail "benchmark ($label) skipped: no usable GPU"
  elif [ "$status" -ne 0 ]; then
    fail "benchmark ($label) FAILED (exit $status)"
  fi
}
bench fp32
bench tf32 --allow-tf32

# --- 3. end-to-end trainings on Fashion-MNIST ---------------------------------------------------
declare -A train_summary
train() {  # train <label> [flags...]: one epoch of the mlp preset on the GPU
  local label=$1 out="$build/train_$1.log" status=0 line
  shift
  if [ "$have_data" -eq 0 ]; then
    fail "training ($label) not run: no Fashion-MNIST in $data_dir (set DATA_DIR)"
    train_summary[$label]="not run (no data)"
    return
  fi
  rm -rf "$build/runs/$label"
  timeout 120 "$build/noeira" train --device cuda --epochs 1 ${data_flags[@]+"${data_flags[@]}"} \
    --out "$build/runs/$label" "$@" 2>&1 | tee "$out" || status=$?
  save_logs
  # "epoch 1/1  train loss 0.5  test loss 0.4  test acc 85.12%  123456 samples/s  epoch 0.49s ..."
  line=$(grep -E '^epoch 1/1 .*test acc' "$out" | tail -n 1 || true)
  if [ "$status" -ne 0 ] || [ -z "$line" ]; then
    fail "training ($label) FAILED (exit $status); log in $out"
    train_summary[$label]="FAILED"
    return
  fi
  local acc rate
  acc=$(sed -E 's/.*test acc ([0-9.]+)%.*/\1/' <<<"$line")
  rate=$(sed -E 's/.* ([0-9.]+) samples\/s.*/\1/' <<<"$line")
  train_summary[$label]="$rate samples/s, test accuracy $acc%"
  # One epoch of this MLP reaches about 85% (CPU reference); far below means it did not learn.
  if ! awk -v a="$acc" 'BEGIN { exit !(a >= 80) }'; then
    fail "training ($label): test accuracy $acc% after one epoch, expected >= 80%"
  fi
}
train 1-rank
train 1-rank-bf16 --precision bf16
train zero3-2-sim --sim-ranks 2 --policy zero3
train zero2-bf16-wire --sim-ranks 2 --policy zero2 --reduce-dtype bf16
train ddp-bf16-grads --sim-ranks 2 --policy ddp --precision bf16 --reduce-dtype bf16 \
  --grad-dtype bf16

# --- 3b. a GPT on text: gpt-char for 300 steps on the GPU, then generation ----------------------
text_dir=${TEXT_DIR:-/usr/share/games/fortunes}
gpt_summary="not run"
gpt() {  # gpt <label> [flags...]
  local label=$1 out="$build/gpt_$1.log" status=0 line
  shift
  if [ ! -d "$text_dir" ]; then
    fail "GPT ($label) not run: no text corpus at $text_dir (set TEXT_DIR)"
    return
  fi
  rm -rf "$build/runs/gpt-$label"
  timeout 180 "$build/noeira" train --device cuda --data text --data-dir "$text_dir" \
    --model gpt-char --steps 300 --eval-every 150 --log-every 50 --out "$build/runs/gpt-$label" \
    "$@" 2>&1 | tee "$out" || status=$?
  save_logs
  # "eval 2/2  train loss 2.1  val loss 2.0  54321 tokens/s  train 4.2s  elapsed 5.0s"
  line=$(grep -E '^eval 2/2 .*val loss' "$out" | tail -n 1 || true)
  if [ "$status" -ne 0 ] || [ -z "$line" ]; then
    fail "GPT ($label) FAILED (exit $status); log in $out"
    gpt_summary="FAILED"
    return
  fi
  local loss rate text
  loss=$(sed -E 's/.*val loss ([0-9.]+).*/\1/' <<<"$line")
  rate=$(sed -E 's/.* ([0-9.]+) tokens\/s.*/\1/' <<<"$line")
  gpt_summary="$rate tokens/s, validation loss $loss after 300 steps"
  # The CPU run reaches about 2.3 after 300 steps; above 3 it did not learn.
  if ! awk -v l="$loss" 'BEGIN { exit !(l <= 3.0) }'; then
    fail "GPT ($label): validation loss $loss after 300 steps, expected <= 3.0"
  fi
  text=$(timeout 60 "$build/noeira" generate --device cuda \
           --params "$build/runs/gpt-$label/model.h5" --prompt "The " --tokens 80 --seed 1 2>&1) \
    || fail "generate ($label) FAILED: $text"
  echo "generated: $text"
}
gpt 1-rank

# --- 4. the NCCL process group -------------------------------------------------------------------
nccl_status=0
BUILD_DIR="$build" bash benchmarks/nccl_check.sh 2>&1 | tee "$build/nccl_check_run.log" \
  || nccl_status=$?
save_logs
if [ "$nccl_status" -ne 0 ]; then fail "NCCL check FAILED (exit $nccl_status)"; fi
nccl_result=$(grep -E '^nccl_check: NCCL tests passed' "$build/nccl_check_run.log" | tail -n 1 \
              | sed 's/^nccl_check: NCCL tests //' || true)

# --- summary -------------------------------------------------------------------------------------
total_s=$((SECONDS - started))
bench_lines() {  # the per-model figures of one benchmark log, indented
  # A failed or skipped benchmark has no such lines: say nothing rather than end the summary.
  if [ -f "$1" ]; then grep -A2 -E '^mlp' "$1" | sed 's/^/    /' || true; fi
}
echo
echo "===================================== gpu_check summary ====================================="
echo "GPU:          $gpu (sm_$arch)"
echo "build:        ${build_s} s ($(nproc) cores)"
echo "GPU tests:    $tests_summary (suites: $suites)"
echo "benchmark, TF32 off:"
bench_lines "$build/bench_fp32.log"
echo "benchmark, TF32 on:"
bench_lines "$build/bench_tf32.log"
if [ -f "$build/bench_tf32.log" ]; then
  grep -E '^  (FP32|TF32 tensor) peak' "$build/bench_tf32.log" | sed 's/^ */    /' || true
fi
echo "train mlp, Fashion-MNIST, 1 epoch, 1 rank:           ${train_summary[1-rank]}"
echo "train mlp, Fashion-MNIST, 1 epoch, 1 rank, bf16:     ${train_summary[1-rank-bf16]}"
echo "train mlp, Fashion-MNIST, 1 epoch, 2 sim ranks zero3: ${train_summary[zero3-2-sim]}"
echo "train mlp, 2 sim ranks zero2, bf16 reductions:        ${train_summary[zero2-bf16-wire]}"
echo "train mlp, 2 sim ranks ddp, bf16 grads and products:  ${train_summary[ddp-bf16-grads]}"
echo "train gpt-char, fortunes, 300 steps, 1 rank:         $gpt_summary"
echo "NCCL tests:   $([ "$nccl_status" -eq 0 ] && echo "${nccl_result:-passed}" \
                      || echo "FAILED (exit $nccl_status)")"
if [ "$total_s" -gt "$budget_s" ]; then
  echo "time:         ${total_s} s: OVER the ${budget_s} s budget"
else
  echo "time:         ${total_s} s (budget ${budget_s} s)"
fi
if [ "${#failures[@]}" -gt 0 ]; then
  echo "result:       FAILED"
  printf '  - %s\n' "${failures[@]}"
  exit 1
fi
echo "result:       PASSED on sm_$arch"
