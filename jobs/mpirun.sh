#!/usr/bin/env bash
# noeira on machines without Slurm: mpirun with NP ranks, THREADS threads each.
#
#   bash jobs/mpirun.sh                                      # this machine, 2 ranks
#   NP=8 THREADS=4 HOSTFILE=hosts bash jobs/mpirun.sh        # over the hosts in an Open MPI hostfile
#   NP=4 POLICY=zero3 EPOCHS=10 bash jobs/mpirun.sh --lr 3e-3
#   DEVICE=cuda NP=4 bash jobs/mpirun.sh                     # one rank per GPU
#
# Knobs (environment variables) are jobs/common.sh's (MODEL, POLICY, EPOCHS, RUN_NAME, OUT_DIR,
# CKPT_DIR, ...) plus:
#   NP=2                  ranks
#   THREADS=cores/NP      threads per rank (at least 1; cores of this machine)
#   HOSTFILE=             Open MPI hostfile; empty: all ranks on this machine
#   DEVICE=               cuda: one rank per GPU (ranks pick GPUs by node-local rank)
#   MPIRUN=mpirun         the launcher; MPIRUN_ARGS: more mpirun options, split on spaces
#
# Ctrl-C (or SIGTERM, SIGUSR1) asks every rank to finish its step, checkpoint and exit 75; run the
# same command again to resume. Ctrl-C twice stops at once, without a checkpoint.
set -euo pipefail

NOEIRA_HOME=${NOEIRA_HOME:-$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)}
# shellcheck source=jobs/common.sh
source "$NOEIRA_HOME/jobs/common.sh"

NP=${NP:-2}
cores=$(nproc)
THREADS=${THREADS:-$((cores / NP > 0 ? cores / NP : 1))}
MPIRUN=${MPIRUN:-mpirun}
export OMP_NUM_THREADS=$THREADS OPENBLAS_NUM_THREADS=$THREADS

device_args=()
[ -z "${DEVICE:-}" ] || device_args=(--device "$DEVICE")
noeira_configure "$NOEIRA_HOME" "${device_args[@]}" "$@"

# Threads need cores of their own: mpirun's default binding (one core per rank when NP <= 2) would
# pile a rank's threads onto one core.
launcher=("$MPIRUN" -np "$NP" --bind-to none -x OMP_NUM_THREADS -x OPENBLAS_NUM_THREADS)
if [ -n "${HOSTFILE:-}" ]; then
  launcher+=(--hostfile "$HOSTFILE")
else
  # One machine: allow more ranks than cores, and start without ssh (Open MPI needs an ssh on
  # PATH even for local ranks unless told that all ranks are local).
  [ "$NP" -le "$cores" ] || launcher+=(--oversubscribe)
  command -v ssh >/dev/null || export OMPI_MCA_plm=isolated
fi
if [ "$(id -u)" -eq 0 ]; then
  # Open MPI refuses to run as root unless told twice; only then is it told.
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
fi
# shellcheck disable=SC2206
[ -z "${MPIRUN_ARGS:-}" ] || launcher+=(${MPIRUN_ARGS})

noeira_log "mpirun: $NP ranks x $THREADS threads${HOSTFILE:+ on the hosts in $HOSTFILE}"
noeira_print_plan "$NOEIRA" "${NOEIRA_ARGS[@]}"

# setsid: mpirun in a process group of its own, so that Ctrl-C reaches only this script (which
# turns it into SIGUSR1 for the ranks) and not mpirun, which would kill the ranks mid-checkpoint.
noeira_run_forwarding setsid "${launcher[@]}" "$NOEIRA" "${NOEIRA_ARGS[@]}"

noeira_summary "$NOEIRA_RC"
exit "$NOEIRA_RC"
