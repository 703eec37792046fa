#!/usr/bin/env bash
# Proof that jobs/cpu.sbatch works on a real Slurm (issue "Cluster jobs"): brings up a private
# single-node Slurm (jobs/slurm_local.sh), then
#   1. ref:  a 2-task job runs to the end: exit 0, an accuracy line, a checkpoint, model.h5;
#   2. cut:  the same job, signalled mid-run with `scancel --signal=USR1 JOB` (reaches the ranks
#            of the srun step): it must checkpoint and exit 75; resubmitted, it must resume from
#            that checkpoint and finish;
#   3. rq:   the same job with REQUEUE=1, signalled with `scancel --signal=USR1 --full` (batch
#            shell too, so the script's forwarding runs and the ranks see the signal twice): it
#            must requeue itself and finish in the second run;
# and the final parameters (model.h5) and final checkpoints of cut and rq must equal ref's bit for
# bit. Stops the daemons it started, whatever happens. Prints the figures: job wall time, time from
# signal to checkpoint on disk.
#
# usage: tests/slurm_test.sh NOEIRA_BINARY [SOURCE_DIR]
# Exit: 0 pass, 1 fail, 77 skip (not root, no Slurm packages and no way to install them, or a
# noeira without checkpoints). KEEP=1 keeps the work directory.
set -euo pipefail

bin=$(realpath "$1")
src=$(realpath "${2:-$(dirname "$0")/..}")
skip() {
  echo "SKIP: $*"
  exit 77
}
fail() {
  echo "FAIL: $*" >&2
  exit 1
}

[ "$(id -u)" -eq 0 ] || skip "needs root (slurmd and munged run as root/munge)"
grep -q -- --checkpoint-dir <<<"$("$bin" train --help)" ||
  skip "$bin train has no --checkpoint-dir yet (checkpointing not wired into the trainer)"
if ! command -v slurmctld >/dev/null || ! command -v slurmd >/dev/null ||
  ! command -v sbatch >/dev/null || ! command -v munged >/dev/null; then
  command -v apt-get >/dev/null ||
    skip "Slurm is not installed and there is no apt-get (packages: slurmctld slurmd slurm-client munge)"
fi

work=$(mktemp -d /tmp/noeira-slurm-test.XXXXXX)
chmod 0755 "$work"
cleanup() {
  local rc=$?
  bash "$src/jobs/slurm_local.sh" stop "$work/slurm" || true
  if [ "$rc" -ne 0 ]; then
    for f in "$work"/*.out; do
      [ -f "$f" ] && { echo "---- $f (last 60 lines)"; tail -n 60 "$f"; }
    done
    for f in "$work"/slurm/log/slurmctld.log "$work"/slurm/log/slurmd.log; do
      [ -f "$f" ] && { echo "---- tail $f"; tail -n 30 "$f"; }
    done
  fi
  if [ "${KEEP:-0}" = 1 ] || [ "$rc" -ne 0 ]; then
    echo "work directory kept: $work"
  else
    rm -rf "$work"
  fi
}
trap cleanup EXIT

t_start=$(date +%s.%N)
bash "$src/jobs/slurm_local.sh" start "$work/slurm" ||
  skip "could not bring up Slurm here (see the message above)"
# shellcheck source=/dev/null
source "$work/slurm/env.sh"
t_up=$(date +%s.%N)

now() { date +%s.%N; }
elapsed() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", b - a }'; }

# The run: 3000 training samples, batch 20 (150 steps an epoch), EPOCHS epochs, 2 ranks x 1 thread.
# Small batches make many short steps, so the run lasts long enough to be hit mid-epoch while the
# whole test stays within a minute or two. Checkpoints only at the end or on a signal (CKPT_EVERY
# is above the step count), so the checkpoint after a signal is the signal's.
epochs=4
steps=$((epochs * 3000 / 20))
export NOEIRA=$bin MODEL=mlp POLICY=ddp EPOCHS=$epochs BATCH=20 CKPT_EVERY=100000 \
  EXTRA_ARGS="--limit-train 3000 --limit-test 1000 --log-every 10 --seed 7"

# submit NAME [sbatch options...]: submits jobs/cpu.sbatch as job NAME (run dir runs/NAME) and
# prints the job id.
submit() {
  local name=$1
  shift
  RUN_NAME=$name sbatch --parsable --chdir="$work" --job-name="$name" --ntasks=2 \
    --ntasks-per-node=2 --cpus-per-task=1 --time=10 --output="$work/%x-%j.out" "$@" \
    "$src/jobs/cpu.sbatch"
}
job_field() { scontrol show job "$1" | tr ' ' '\n' | sed -n "s/^$2=//p" | head -n 1; }
# wait_job ID [TIMEOUT_S]: until the job has left the queue for good (not pending or requeued).
wait_job() {
  local id=$1 limit=${2:-300} state
  local deadline=$((SECONDS + limit))
  while [ $SECONDS -lt $deadline ]; do
    state=$(job_field "$id" JobState)
    case $state in
      COMPLETED | FAILED | CANCELLED | TIMEOUT | NODE_FAIL | OUT_OF_MEMORY | PREEMPTED) return 0 ;;
    esac
    sleep 0.2
  done
  fail "job $id still $state after ${limit}s"
}
expect_job() { # ID STATE EXITCODE
  local state code
  state=$(job_field "$1" JobState)
  code=$(job_field "$1" ExitCode)
  if [ "$state" != "$2" ] || [ "$code" != "$3" ]; then
    fail "job $1: expected $2 with ExitCode=$3, got $state with ExitCode=$code (log: $(ls "$work"/*-"$1".out))"
  fi
}
job_seconds() { # wall time of a finished job, from Slurm's own StartTime/EndTime
  local s e
  s=$(date -d "$(job_field "$1" StartTime)" +%s)
  e=$(date -d "$(job_field "$1" EndTime)" +%s)
  echo $((e - s))
}
# wait_for_line JOB FILE REGEX TIMEOUT_S: until the running job's log has a line matching REGEX.
wait_for_line() {
  local deadline=$((SECONDS + $4)) state
  until grep -Eq "$3" "$2" 2>/dev/null; do
    [ $SECONDS -lt $deadline ] || fail "no line matching '$3' in $2 after $4 s"
    state=$(job_field "$1" JobState)
    case $state in
      PENDING | RUNNING | CONFIGURING) ;;
      *) grep -Eq "$3" "$2" 2>/dev/null || fail "job $1 is $state before a line matching '$3' appeared in $2" ;;
    esac
    sleep 0.05
  done
}
latest_of() { cat "$work/runs/$1/checkpoints/latest" 2>/dev/null || true; }
step_of() { local l; l=$(latest_of "$1"); l=${l#step-}; echo $((10#${l:-0})); }
accuracy_re='test acc(uracy)? [0-9.]+'

# Compares every float dataset of two HDF5 files, or of two checkpoint step directories (rank files
# paired by name), bit for bit. Prints the count compared; non-zero exit on the first difference.
compare_h5() {
  /usr/bin/python3 - "$1" "$2" <<'EOF'
import glob, os, sys
import h5py, numpy as np

def files(p):
    return sorted(glob.glob(os.path.join(p, "rank-*.h5"))) if os.path.isdir(p) else [p]

def datasets(path):
    out = {}
    with h5py.File(path, "r") as f:
        f.visititems(lambda n, o: out.__setitem__(n, o[...]) if isinstance(o, h5py.Dataset) and o.dtype.kind == "f" else None)
    return out

a, b = files(sys.argv[1]), files(sys.argv[2])
if not a or len(a) != len(b) or (os.path.isdir(sys.argv[1]) and [os.path.basename(x) for x in a] != [os.path.basename(x) for x in b]):
    sys.exit("different file sets: %s vs %s" % (a, b))
count = 0
for fa, fb in zip(a, b):
    da, db = datasets(fa), datasets(fb)
    if sorted(da) != sorted(db):
        sys.exit("%s vs %s: different tensors" % (fa, fb))
    if not da:
        sys.exit("%s: no float tensors" % fa)
    for name in da:
        x, y = da[name], db[name]
        if x.shape != y.shape or x.tobytes() != y.tobytes():
            diff = np.max(np.abs(x.astype(np.float64) - y.astype(np.float64))) if x.shape == y.shape else "shape"
            sys.exit("%s: %s differs (max |diff| %s)" % (fb, name, diff))
        count += 1
print(count)
EOF
}

echo "== 1. ref: uninterrupted run"
ref=$(submit ref)
wait_job "$ref"
expect_job "$ref" COMPLETED 0:0
ref_out=$work/ref-$ref.out
grep -Eq "$accuracy_re" "$ref_out" || fail "no accuracy line in $ref_out"
[ -n "$(latest_of ref)" ] || fail "ref: no checkpoint (runs/ref/checkpoints/latest)"
[ "$(step_of ref)" -eq "$steps" ] || fail "ref: last checkpoint at step $(step_of ref), expected $steps"
[ -f "$work/runs/ref/model.h5" ] || fail "ref: no model.h5"
[ -s "$work/runs/ref/metrics.jsonl" ] || fail "ref: no metrics.jsonl"
ref_wall=$(job_seconds "$ref")
echo "ref: job $ref completed in ${ref_wall}s; $(grep -E "$accuracy_re" "$ref_out" | tail -n 1)"

echo "== 2. cut: signalled mid-run, then resubmitted"
cut=$(submit cut)
cut_out=$work/cut-$cut.out
# Signal once training is under way: after the first step lines of epoch 2.
wait_for_line "$cut" "$cut_out" '^epoch 2 step' 120
scancel --signal=USR1 "$cut"
t_signal=$(now)
until [ -n "$(latest_of cut)" ]; do
  [ "$(job_field "$cut" JobState)" = RUNNING ] || [ -n "$(latest_of cut)" ] ||
    fail "cut: job ended without a checkpoint"
  sleep 0.01
done
t_ckpt=$(now)
wait_job "$cut"
t_end=$(now)
expect_job "$cut" FAILED 75:0
cut_step=$(step_of cut)
if [ "$cut_step" -le 0 ] || [ "$cut_step" -ge "$steps" ]; then
  fail "cut: checkpoint at step $cut_step is not mid-run (0 < step < $steps)"
fi
grep -q "stopped to be resumed" "$cut_out" || fail "cut: the job did not report 'stopped to be resumed'"
signal_to_ckpt=$(elapsed "$t_signal" "$t_ckpt")
signal_to_end=$(elapsed "$t_signal" "$t_end")
echo "cut: job $cut stopped at step $cut_step of $steps, exit 75; checkpoint ${signal_to_ckpt}s after the signal, job gone after ${signal_to_end}s"

cut2=$(submit cut)
wait_job "$cut2"
expect_job "$cut2" COMPLETED 0:0
cut2_out=$work/cut-$cut2.out
grep -q "resuming from $work/runs/cut/checkpoints/step-" "$cut2_out" ||
  fail "cut: the resubmitted job did not resume"
grep -Eq "$accuracy_re" "$cut2_out" || fail "cut: no accuracy line after the resume"
[ "$(step_of cut)" -eq "$steps" ] || fail "cut: last checkpoint at step $(step_of cut), expected $steps"
echo "cut: job $cut2 resumed from step $cut_step and completed in $(job_seconds "$cut2")s"

echo "== 3. rq: REQUEUE=1, signalled with --full (batch shell and ranks)"
rq=$(REQUEUE=1 submit rq)
rq_out=$work/rq-$rq.out
wait_for_line "$rq" "$rq_out" '^epoch 2 step' 120
scancel --signal=USR1 --full "$rq"
# The script requeues the job; Slurm holds a requeued job back (BeginTime) for about 2 minutes.
# Release it sooner, but only once the node has cleaned up the first run and a new second has begun:
# slurmd refuses a launch whose credential is not newer (in whole seconds) than the revoked one.
deadline=$((SECONDS + 60))
until [ "$(job_field "$rq" Restarts)" = 1 ]; do
  [ $SECONDS -lt $deadline ] || fail "rq: job $rq was not requeued"
  sleep 0.1
done
rq_step=$(step_of rq)
if [ "$rq_step" -le 0 ] || [ "$rq_step" -ge "$steps" ]; then
  fail "rq: checkpoint at step $rq_step is not mid-run"
fi
deadline=$((SECONDS + 60))
until [ "$(sinfo -h -o %T)" = idle ]; do
  [ $SECONDS -lt $deadline ] || fail "rq: node not idle after the requeue"
  sleep 0.1
done
# The first run's step daemon must be gone too: the rerun's step has the same id ($rq.0), and
# PMIx refuses to start it while the old step's socket still exists (Slurm's own two-minute hold
# covers this on a real cluster).
deadline=$((SECONDS + 60))
while pgrep -f "slurmstepd: \\[$rq\\.0\\]" >/dev/null; do
  [ $SECONDS -lt $deadline ] || fail "rq: the first run's step $rq.0 did not finish"
  sleep 0.1
done
rm -f "$work/slurm/spool/stepd.slurm.pmix.$rq.0"  # left behind by a step daemon that is gone
sleep 2
scontrol update jobid="$rq" StartTime=now
wait_job "$rq"
expect_job "$rq" COMPLETED 0:0
grep -q "requeueing job $rq" "$rq_out" || fail "rq: no requeue message"
grep -q "resuming from $work/runs/rq/checkpoints/step-" "$rq_out" || fail "rq: the requeued run did not resume"
[ "$(step_of rq)" -eq "$steps" ] || fail "rq: last checkpoint at step $(step_of rq), expected $steps"
echo "rq: job $rq stopped at step $rq_step, requeued itself, resumed and completed"

echo "== 4. final parameters equal the uninterrupted run's, bit for bit"
for run in cut rq; do
  n=$(compare_h5 "$work/runs/ref/model.h5" "$work/runs/$run/model.h5") ||
    fail "$run: model.h5 differs from ref's"
  m=$(compare_h5 "$work/runs/ref/checkpoints/$(latest_of ref)" "$work/runs/$run/checkpoints/$(latest_of $run)") ||
    fail "$run: final checkpoint differs from ref's"
  echo "$run: model.h5 ($n tensors) and final checkpoint ($m tensors) identical to ref's"
done

t_done=$(now)
echo "== figures"
echo "slurm up:                       $(elapsed "$t_start" "$t_up") s"
echo "uninterrupted job wall time:    ${ref_wall} s (2 ranks x 1 thread, $steps steps)"
echo "signal -> checkpoint on disk:   ${signal_to_ckpt} s"
echo "signal -> job ended (exit 75):  ${signal_to_end} s"
echo "whole test:                     $(elapsed "$t_start" "$t_done") s"
echo "PASS"
