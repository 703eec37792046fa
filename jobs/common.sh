# shellcheck shell=bash disable=SC2034  # sets variables for the launcher that sources it
# Shared by jobs/cpu.sbatch, jobs/gpu.sbatch and jobs/mpirun.sh (sourced, not run): the knobs and
# their defaults, the `noeira train` command line, the resume decision, signal forwarding and the
# closing summary. One place, so that the three launchers cannot drift apart.
#
# Knobs (environment variables; unset or empty means the default):
#   MODEL=mlp  DATA=fashion-mnist  DATA_DIR=(noeira's default)  POLICY=ddp  EPOCHS=5
#   BATCH=(noeira's default: global batch, all ranks together)
#   RUN_NAME=$SLURM_JOB_NAME (sbatch -J), else noeira: names the run directory below; same name,
#                      same run: a job with the name of an interrupted one resumes it
#   OUT_DIR=runs/$RUN_NAME            metrics.jsonl, config.json, model.h5
#   CKPT_DIR=$OUT_DIR/checkpoints     step-NNNNNNNN/ directories and `latest`
#   CKPT_EVERY=1000    steps between periodic checkpoints (0: only at the end and on a stop
#                      signal); they are what is left after a kill that gives no warning (node
#                      failure, `scancel` without --signal, out of memory)
#   KEEP_LAST=3        committed checkpoints kept (0: all)
#   EXTRA_ARGS=        more `noeira train` options, split on spaces (arguments given to the
#                      script itself are appended too, unsplit)
#   NOEIRA=            the binary (default: `noeira` on PATH, else build/noeira of this checkout)
#
# Exit codes of `noeira train`, passed through by every launcher:
#   0 finished; 75 (EX_TEMPFAIL) stopped by SIGTERM/SIGUSR1 after writing a checkpoint, to be
#   resumed; anything else a failure.

readonly NOEIRA_EXIT_RESUMABLE=75

noeira_log() { echo "[noeira-job $(date '+%F %T')] $*"; }
noeira_die() {
  echo "[noeira-job] error: $*" >&2
  exit 1
}

# $1: the checkout these scripts belong to. Sets every knob's default and NOEIRA_ARGS, the
# `noeira train ...` arguments (without the binary). Remaining arguments are appended to them.
noeira_configure() {
  local home=$1
  shift
  MODEL=${MODEL:-mlp}
  DATA=${DATA:-fashion-mnist}
  POLICY=${POLICY:-ddp}
  EPOCHS=${EPOCHS:-5}
  RUN_NAME=${RUN_NAME:-${SLURM_JOB_NAME:-noeira}}
  OUT_DIR=${OUT_DIR:-runs/$RUN_NAME}
  CKPT_DIR=${CKPT_DIR:-$OUT_DIR/checkpoints}
  CKPT_EVERY=${CKPT_EVERY:-1000}
  KEEP_LAST=${KEEP_LAST:-3}
  if [ -z "${NOEIRA:-}" ]; then
    NOEIRA=$(command -v noeira || true)
    [ -n "$NOEIRA" ] || NOEIRA=$home/build/noeira
  fi
  [ -x "$NOEIRA" ] || noeira_die "no noeira binary at '$NOEIRA' (build it, or set NOEIRA=/path/to/noeira)"
  # A stale build would fail on every rank with "arguments were not expected": say it plainly.
  # The help is read whole first: `grep -q` stops at its match, and under pipefail the binary's
  # SIGPIPE on the rest of a long help would read as a missing flag.
  local help
  help=$("$NOEIRA" train --help 2>/dev/null || true)
  grep -q -- --checkpoint-dir <<<"$help" ||
    noeira_die "$NOEIRA train has no --checkpoint-dir: an old build? rebuild it (cmake --build build --target noeira)"
  # Absolute paths: every rank, on every node, must name the same directories.
  mkdir -p "$OUT_DIR" "$CKPT_DIR"
  OUT_DIR=$(cd "$OUT_DIR" && pwd)
  CKPT_DIR=$(cd "$CKPT_DIR" && pwd)

  NOEIRA_ARGS=(train --model "$MODEL" --data "$DATA" --policy "$POLICY" --epochs "$EPOCHS"
    --threads "$THREADS" --out "$OUT_DIR" --checkpoint-dir "$CKPT_DIR")
  [ -z "${DATA_DIR:-}" ] || NOEIRA_ARGS+=(--data-dir "$DATA_DIR")
  [ -z "${BATCH:-}" ] || NOEIRA_ARGS+=(--batch "$BATCH")
  NOEIRA_ARGS+=(--checkpoint-every "$CKPT_EVERY" --keep-last "$KEEP_LAST")

  # Resume whenever a committed checkpoint exists: a requeued or resubmitted job continues where
  # the last one stopped. `latest` is written last by the checkpoint commit, so its presence means
  # a complete checkpoint.
  # To start over, use another RUN_NAME (or CKPT_DIR).
  if [ -f "$CKPT_DIR/latest" ]; then
    NOEIRA_RESUME_FROM="$CKPT_DIR/$(cat "$CKPT_DIR/latest")"
    NOEIRA_ARGS+=(--resume latest)
  else
    NOEIRA_RESUME_FROM=
  fi
  # EXTRA_ARGS is split on spaces on purpose (no quoting inside it; use script arguments instead).
  # shellcheck disable=SC2206
  [ -z "${EXTRA_ARGS:-}" ] || NOEIRA_ARGS+=(${EXTRA_ARGS})
  NOEIRA_ARGS+=("$@")
}

noeira_print_plan() {
  noeira_log "binary      $NOEIRA"
  noeira_log "run         $*"
  noeira_log "metrics     $OUT_DIR/metrics.jsonl"
  noeira_log "checkpoints $CKPT_DIR"
  if [ -n "$NOEIRA_RESUME_FROM" ]; then
    noeira_log "resuming from $NOEIRA_RESUME_FROM"
  else
    noeira_log "starting fresh (no $CKPT_DIR/latest)"
  fi
}

# Runs "$@" (the launcher: srun or mpirun) in the background and waits for it, turning SIGTERM,
# SIGINT and SIGUSR1 received by this shell into one SIGUSR1 for the launcher, which forwards it
# to every rank: the ranks finish the current step, checkpoint and exit 75. Why: a shell waiting
# in the foreground dies of these signals (batch shells get SIGTERM at preemption, SIGUSR1 from
# `scancel --batch` or `--signal=B:...`), and mpirun answers SIGTERM by killing the ranks within
# seconds. A second SIGINT (Ctrl-C twice) sends SIGTERM: the launcher then stops the job the hard
# way. Sets NOEIRA_RC to the launcher's exit code.
noeira_run_forwarding() {
  NOEIRA_SIGNALS=0
  # Written just before the launch, on the run's own file system (its clock stamps model.h5 too).
  local stamp=$OUT_DIR/.noeira-launch-stamp
  : >"$stamp"
  "$@" &
  NOEIRA_LAUNCHER_PID=$!
  trap 'noeira_on_signal USR1' USR1
  trap 'noeira_on_signal TERM' TERM
  trap 'noeira_on_signal INT' INT
  local rc
  while :; do
    rc=0
    wait "$NOEIRA_LAUNCHER_PID" || rc=$?
    # wait returns >128 when a trapped signal interrupts it; the launcher is still running then.
    if [ "$rc" -gt 128 ] && kill -0 "$NOEIRA_LAUNCHER_PID" 2>/dev/null; then continue; fi
    break
  done
  trap - USR1 TERM INT
  # srun can exit 0 when the step never started ("task 0 launch failed"). A finished run has
  # written model.h5 after the launch; without it, 0 would be a lie.
  if [ "$rc" -eq 0 ] && { [ ! -f "$OUT_DIR/model.h5" ] || [ "$stamp" -nt "$OUT_DIR/model.h5" ]; }; then
    noeira_log "the launcher exited 0 but noeira wrote no $OUT_DIR/model.h5: the ranks did not run (see the launcher's errors above)"
    rc=1
  fi
  rm -f "$stamp"
  NOEIRA_RC=$rc
}

noeira_on_signal() {
  NOEIRA_SIGNALS=$((NOEIRA_SIGNALS + 1))
  local forward=USR1
  if [ "$1" = INT ] && [ "$NOEIRA_SIGNALS" -gt 1 ]; then forward=TERM; fi
  noeira_log "got SIG$1: asking the ranks to checkpoint and stop (SIG$forward to the launcher)"
  kill -s "$forward" "$NOEIRA_LAUNCHER_PID" 2>/dev/null || true
}

# Prints what happened and where the results are; $1 is the exit code.
noeira_summary() {
  local rc=$1 latest=none
  if [ -f "$CKPT_DIR/latest" ]; then latest="$CKPT_DIR/$(cat "$CKPT_DIR/latest")"; fi
  case $rc in
    0) noeira_log "finished (exit 0)" ;;
    "$NOEIRA_EXIT_RESUMABLE") noeira_log "stopped to be resumed (exit 75): a checkpoint was written" ;;
    *) noeira_log "FAILED (exit $rc)" ;;
  esac
  noeira_log "metrics:     $OUT_DIR/metrics.jsonl"
  if [ -f "$OUT_DIR/model.h5" ]; then noeira_log "parameters:  $OUT_DIR/model.h5"; fi
  noeira_log "checkpoint:  $latest"
  if [ "$latest" != none ]; then noeira_log "inspect it:  $NOEIRA inspect $latest"; fi
}
