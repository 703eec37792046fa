#!/bin/sh
# Kill -9 of ONE rank of `mpiexec -n 2 noeira train` that checkpoints every step, at random
# moments (TRIALS times): mpiexec must tear the other rank down, and `latest` must name a
# checkpoint that `noeira inspect` reads (every checksum) and that `--resume latest` loads, under
# mpiexec -n 2 again, with no step left (the loaded state is committed again at the same step,
# with the same tensors, and the killed write's .tmp-step-* leftovers are gone).
# Usage: checkpoint_kill.sh MPIEXEC NUMPROC_FLAG NOEIRA WORKDIR [TRIALS]. Exit 77: skipped.
set -e
mpiexec=$1 flag=$2 noeira=$3 work=$4 trials=${5:-3}
. "$(dirname "$0")/fashion_mnist_work.sh"

fail() {
  echo "FAIL: $*"
  exit 1
}

# The step `latest` in $1 names, or -1.
latest_step() {
  name=$(cat "$1/latest" 2>/dev/null || true)
  case $name in
    step-*) echo "${name#step-}" | sed 's/^0*\([0-9]\)/\1/' ;;
    *) echo -1 ;;
  esac
}

# The tensor lines of `noeira inspect $1`.
tensors() {
  "$noeira" inspect "$1" </dev/null >"$work/inspect.out" 2>&1 ||
    fail "inspect $1: $(cat "$work/inspect.out")"
  grep '^  params/' "$work/inspect.out"
}

# 100 samples in 2 steps of 50 per epoch; about 2.8 MB of checkpoint per step.
common="train --limit-train 100 --limit-test 50 --batch 50 --threads 1 --log-every 0
        --schedule constant --policy zero2 --watchdog-timeout 60 --checkpoint-every 1"

trial=1
while [ "$trial" -le "$trials" ]; do
  ckpt="$work/ckpt-$trial"
  "$mpiexec" "$flag" 2 "$noeira" $common --epochs 5000 --checkpoint-dir "$ckpt" \
    --out "$work/run-$trial" </dev/null >"$work/mpiexec-$trial.log" 2>&1 &
  launcher=$!
  waited=0
  while [ "$(latest_step "$ckpt")" -lt 2 ]; do
    sleep 0.02
    waited=$((waited + 1))
    [ "$waited" -lt 3000 ] ||
      fail "trial $trial: no checkpoint after 60 s: $(cat "$work/mpiexec-$trial.log")"
  done
  # 0 to 400 ms later, SIGKILL to the rank process (not mpiexec) whose environment says rank
  # $victim; only processes whose command line holds this trial's checkpoint directory qualify.
  delay=$(awk -v s="$$$trial" 'BEGIN { srand(s); printf "%.3f", rand() * 0.4 }')
  victim=$((trial % 2))
  sleep "$delay"
  pid=
  for p in $(pgrep -f -- "--checkpoint-dir $ckpt " || true); do
    [ "$p" != "$launcher" ] || continue
    if tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null | grep -qx "OMPI_COMM_WORLD_RANK=$victim"; then
      pid=$p
    fi
  done
  [ -n "$pid" ] || fail "trial $trial: rank $victim's process not found"
  kill -9 "$pid"
  echo "trial $trial: killed rank $victim (pid $pid) $delay s after step 2 was committed"
  status=0
  wait "$launcher" || status=$?
  [ "$status" -ne 0 ] || fail "trial $trial: mpiexec exited 0 after a rank was killed"
  # mpiexec may return while the kernel is still tearing down the rank it killed last: give the
  # processes a few seconds to disappear, then none may be left.
  left=$(pgrep -f -- "--checkpoint-dir $ckpt " || true)
  grace=0
  while [ -n "$left" ] && [ "$grace" -lt 50 ]; do
    sleep 0.1
    grace=$((grace + 1))
    left=$(pgrep -f -- "--checkpoint-dir $ckpt " || true)
  done
  if [ -n "$left" ]; then
    kill -9 $left
    fail "trial $trial: rank processes left behind: $left"
  fi

  step=$(latest_step "$ckpt")
  [ "$step" -ge 2 ] || fail "trial $trial: latest names step $step"
  before=$(tensors "$ckpt")
  grep -q "^step $step, " "$work/inspect.out" ||
    fail "trial $trial: inspect: $(cat "$work/inspect.out")"
  samples=$(sed -n 's/.*samples seen \([0-9]*\),.*/\1/p' "$work/inspect.out")
  epochs=$((samples / 100))
  "$mpiexec" "$flag" 2 "$noeira" $common --epochs "$epochs" --checkpoint-dir "$ckpt" \
    --resume latest --out "$work/resumed-$trial" </dev/null >"$work/resume-$trial.log" 2>&1 ||
    fail "trial $trial: resume: $(cat "$work/resume-$trial.log")"
  grep -q "resumed from .* at step $step " "$work/resume-$trial.log" ||
    fail "trial $trial: resume did not start at step $step: $(cat "$work/resume-$trial.log")"
  [ "$(latest_step "$ckpt")" -eq "$step" ] || fail "trial $trial: latest moved"
  after=$(tensors "$ckpt")
  [ "$before" = "$after" ] || fail "trial $trial: tensors changed by loading and saving again"
  if ls -A "$ckpt" | grep -q '^\.tmp-'; then
    fail "trial $trial: leftovers of the killed write: $(ls -A "$ckpt")"
  fi
  echo "trial $trial: latest step $step inspected and resumed"
  trial=$((trial + 1))
done
