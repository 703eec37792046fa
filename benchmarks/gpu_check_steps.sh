# shellcheck shell=bash disable=SC2154  # sourced: gpu_check.sh sets build, have_gpu, gpu, ...
# The checks of `gpu_check.sh run`, most valuable first; sourced by gpu_check.sh, whose variables
# (build, have_gpu, arch, gpu, deadline) and functions (fail, note, left, save_logs) they use.
# Every step has its own timeout, cut to what is left of the window (20 s stay for the summary);
# a step with less than 15 s left is not started and says so.
#
# GPU_CHECK_ON_CPU=1 rehearses these steps without a GPU: every GPU run becomes a CPU run (and the
# GPU tests skip), so that the parsing, the tolerances and the summary are tried before a
# device's minutes are spent on them. Its figures check nothing about the GPU.
device=cuda
if [ "${GPU_CHECK_ON_CPU:-0}" = 1 ]; then
  device=cpu
  have_gpu=1
fi

declare -A results=()  # label -> one line for the summary
order=()

result() {  # result <label> <line>
  [ -n "${results[$1]:-}" ] || order+=("$1")
  results[$1]=$2
}

# step <label> <max seconds> <command...>: output into $build/<label>.log (and the terminal).
# Returns the command's status, 124 on its timeout, 125 when not started for lack of time.
step() {
  local label=$1 max=$2 budget status=0
  shift 2
  budget=$(($(left) - 20))
  [ "$budget" -lt "$max" ] || budget=$max
  if [ "$budget" -lt 15 ]; then
    result "$label" "not run: $(left) s of the window left"
    return 125
  fi
  local t=$SECONDS
  timeout "$budget" "$@" >"$build/$label.log" 2>&1 || status=$?
  cat "$build/$label.log"
  save_logs
  step_seconds=$((SECONDS - t))
  [ "$status" -ne 124 ] || fail "$label: did not finish in $budget s (log in $build/$label.log)"
  return "$status"
}

no_gpu() {  # no_gpu <label>: records why a GPU step did not run; true when there is no GPU
  [ "$have_gpu" -eq 0 ] || return 1
  result "$1" "not run: no GPU here"
  return 0
}

# --- 1. every GPU test of the gtest binary against the CPU ----------------------------------------
# Every GPU test has Cuda in its suite name. A test that can only run without a GPU (a refusal of
# --device cuda) skips saying "a GPU is present": expected. Any other skip is a failure here.
gpu_tests() {
  local filter='*Cuda*' listed count status=0 log=$build/gpu_tests.log
  listed=$("$build/tests/noeira_tests" --gtest_list_tests --gtest_filter="$filter")
  count=$(grep -c '^  ' <<<"$listed" || true)
  no_gpu gpu_tests && return
  if [ -n "${DATA_DIR:-}" ]; then export NOEIRA_FASHION_MNIST_DIR=$DATA_DIR; fi
  step gpu_tests 240 "$build/tests/noeira_tests" --gtest_filter="$filter" --gtest_color=no ||
    status=$?
  [ "$status" -ne 125 ] || return
  local skips unexpected passed
  skips=$(awk '/^\[ RUN      \]/ { reason = "" }
               /: Skipped$/ { getline reason }
               /^\[  SKIPPED \] .* \([0-9]+ ms\)$/ { print $4 ": " reason }' "$log")
  unexpected=$(grep -v ': a GPU is present' <<<"$skips" || true)
  passed=$(sed -n 's/^\[  PASSED  \] \([0-9][0-9]*\) test.*/\1/p' "$log" | tail -n 1)
  local line="${passed:-0} of $count passed in $step_seconds s"
  if [ -n "$unexpected" ]; then
    fail "gpu_tests: $(grep -c . <<<"$unexpected") skipped on a GPU machine, the first: $(head -n 1 <<<"$unexpected")"
    line+=", $(grep -c . <<<"$unexpected") skipped"
    # CUDA itself unusable (a driver older than the toolkit, say): no later step can run.
    if [ "$device" = cuda ] && grep -q 'no CUDA device' <<<"$unexpected"; then cuda_unusable=1; fi
  fi
  if [ "$status" -ne 0 ]; then
    line+=", FAILED: $(sed -n 's/^\[  FAILED  \] \([A-Za-z0-9_/]*\.[A-Za-z0-9_/]*\).*/\1/p' "$log" |
                       sort -u | head -n 8 | tr '\n' ' ')"
    fail "gpu_tests: exit $status (log in $log)"
  fi
  result gpu_tests "$line"
}

# --- 2. trainings on the GPU against the same run on the CPU --------------------------------------
# The last period's training loss of the GPU run and of the CPU run: other summation orders, so
# not equal, but within `tolerance` (relative). "epoch 2/2  train loss 0.45  test loss ..."
last_train_loss() { sed -nE 's/^epoch [0-9]+\/[0-9]+ +train loss ([0-9.eE+-]+).*/\1/p' "$1" | tail -n 1; }
last_accuracy() { sed -nE 's/^epoch .*test acc ([0-9.]+)%.*/\1/p' "$1" | tail -n 1; }

# train_vs_cpu <label> <tolerance> <min accuracy %> <noeira train flags...>
train_vs_cpu() {
  local label=$1 tolerance=$2 min_acc=$3
  shift 3
  no_gpu "train_$label" && return
  local flags=(train --log-every 0 --data-dir "$DATA_DIR" "$@")
  rm -rf "$build/runs/$label" "$build/runs/$label-cpu"
  step "train_$label" 90 "$build/noeira" "${flags[@]}" --device "$device" --out "$build/runs/$label" ||
    { [ $? -eq 125 ] || fail "train $label: the GPU run FAILED (log in $build/train_$label.log)"; return; }
  local gpu_s=$step_seconds
  step "train_${label}_cpu" 90 "$build/noeira" "${flags[@]}" --device cpu \
    --out "$build/runs/$label-cpu" ||
    { [ $? -eq 125 ] || fail "train $label: the CPU run FAILED"; return; }
  local g c acc diff
  g=$(last_train_loss "$build/train_$label.log")
  c=$(last_train_loss "$build/train_${label}_cpu.log")
  acc=$(last_accuracy "$build/train_$label.log")
  diff=$(awk -v g="$g" -v c="$c" 'BEGIN { d = (g - c) / c; if (d < 0) d = -d; printf "%.2e", d }')
  result "train_$label" "GPU loss $g, CPU $c (relative $diff), test accuracy $acc% ($gpu_s s)"
  awk -v d="$diff" -v t="$tolerance" 'BEGIN { exit !(d <= t) }' ||
    fail "train $label: GPU and CPU losses differ by $diff relative, more than $tolerance"
  awk -v a="$acc" -v m="$min_acc" 'BEGIN { exit !(a >= m) }' ||
    fail "train $label: test accuracy $acc% on the GPU, expected >= $min_acc%"
}

# --- 2b. a GPT on text on the GPU, then generation -------------------------------------------------
gpt_on_gpu() {
  no_gpu train_gpt_char && return
  local dir=$build/runs/gpt-char line loss
  rm -rf "$dir"
  step train_gpt_char 120 "$build/noeira" train --device "$device" --data text --data-dir "$TEXT_DIR" \
    --model gpt-char --steps 300 --eval-every 150 --log-every 50 --out "$dir" ||
    { [ $? -eq 125 ] || fail "gpt-char on the GPU FAILED (log in $build/train_gpt_char.log)"; return; }
  # "eval 2/2  train loss 2.1  val loss 2.0  54321 tokens/s ..."; the CPU reaches about 2.3.
  line=$(grep -E '^eval 2/2 .*val loss' "$build/train_gpt_char.log" | tail -n 1 || true)
  loss=$(sed -E 's/.*val loss ([0-9.]+).*/\1/' <<<"$line")
  result train_gpt_char "validation loss $loss after 300 steps ($step_seconds s)"
  awk -v l="$loss" 'BEGIN { exit !(l != "" && l <= 3.0) }' ||
    fail "gpt-char: validation loss '$loss' after 300 steps, expected <= 3.0"
  step generate 30 "$build/noeira" generate --device "$device" --params "$dir/model.h5" --prompt "The " \
    --tokens 80 --seed 1 || fail "generate on the GPU FAILED (log in $build/generate.log)"
}

# --- 3. the NCCL process group --------------------------------------------------------------------
nccl() {
  no_gpu nccl && return
  local status=0
  step nccl 120 env BUILD_DIR="$build" bash benchmarks/nccl_check.sh || status=$?
  [ "$status" -ne 125 ] || return
  if [ "$status" -ne 0 ]; then
    fail "NCCL check FAILED (exit $status; log in $build/nccl.log)"
    result nccl "FAILED (exit $status)"
  else
    result nccl "$(sed -n 's/^nccl_check: //p' "$build/nccl.log" | tail -n 1)"
  fi
}

# --- 4. training throughput -----------------------------------------------------------------------
throughput() {  # throughput <label> [flags...]
  local label=$1
  shift
  no_gpu "bench_$label" && return
  step "bench_$label" 60 "$build/benchmarks/bench_gpu_throughput" --device "$device" "$@" ||
    { [ $? -eq 125 ] || fail "benchmark $label FAILED"; return; }
  result "bench_$label" "$(grep -A2 -E '^mlp' "$build/bench_$label.log" | tr -s ' ' | tr '\n' ' ')"
}

# --- 5. compute-sanitizer on the kernel tests, while time remains ---------------------------------
sanitize() {  # sanitize <tool> <gtest filter> <max seconds>
  local tool=$1 filter=$2 max=$3 status=0
  no_gpu "sanitizer_$tool" && return
  command -v compute-sanitizer >/dev/null ||
    { result "sanitizer_$tool" "not run: no compute-sanitizer on PATH"; return; }
  step "sanitizer_$tool" "$max" compute-sanitizer --tool "$tool" --error-exitcode 9 \
    "$build/tests/noeira_tests" --gtest_filter="$filter" --gtest_color=no || status=$?
  case $status in
    0) result "sanitizer_$tool" "clean on $filter ($step_seconds s)" ;;
    124 | 125) ;;
    *) result "sanitizer_$tool" "FAILED (exit $status)"
       fail "compute-sanitizer $tool found errors in $filter (log in $build/sanitizer_$tool.log)" ;;
  esac
}

run_steps() {
  DATA_DIR=${DATA_DIR:-/usr/share/datasets/fashion-mnist}
  TEXT_DIR=${TEXT_DIR:-/usr/share/games/fortunes}
  cuda_unusable=0
  gpu_tests
  if [ "$cuda_unusable" -eq 1 ]; then
    fail "CUDA is unusable here (the GPU tests' skip reason above): the other steps were not run"
    summary
    return
  fi
  # Two epochs of the 8,000-image slice (gpu_deps.sh) reach about 82% on the CPU.
  local two=(--epochs 2)
  train_vs_cpu mlp 1e-2 80 "${two[@]}"
  train_vs_cpu mlp_bf16 5e-2 80 "${two[@]}" --precision bf16
  train_vs_cpu resnet20 2e-2 0 --model resnet20 --epochs 1 --limit-train 2000 --limit-test 500
  train_vs_cpu zero3_2sim 1e-2 80 "${two[@]}" --sim-ranks 2 --policy zero3
  train_vs_cpu zero2_bf16_wire 5e-2 80 "${two[@]}" --sim-ranks 2 --policy zero2 --reduce-dtype bf16
  train_vs_cpu ddp_bf16_grads 5e-2 80 "${two[@]}" --sim-ranks 2 --policy ddp --precision bf16 \
    --reduce-dtype bf16 --grad-dtype bf16
  gpt_on_gpu
  nccl
  throughput fp32
  if [ "$device" = cuda ]; then throughput tf32 --allow-tf32; fi
  sanitize memcheck 'CudaVsCpu.*:CudaModule.*' 150
  sanitize racecheck 'CudaVsCpu.*' 120
  summary
}

summary() {
  echo
  echo "===================================== gpu_check summary ====================================="
  echo "GPU:    $gpu (sm_$arch)"
  echo "build:  $(cat "$build/gpu_check_build_seconds") s ($(nproc) cores)"
  local label
  for label in "${order[@]}"; do printf '%-24s %s\n' "$label:" "${results[$label]}"; done
  echo "time:   $((SECONDS - phase_start)) s of the ${window_s} s window"
  if [ -f "$build/registers.log" ]; then
    echo "registers: $(tail -n 1 "$build/registers.log")"
  fi
  save_logs
}
