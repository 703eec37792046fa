#!/bin/sh
# `mpiexec -n 2 noeira train --policy zero3` against `noeira train --sim-ranks 2 --policy zero3`:
# the saved parameters must be identical bit for bit (h5diff without a tolerance compares exactly).
# Both use one thread per rank: OpenBLAS rounds differently at different thread counts. Then
# exact resume under MPI: a run resumed (new processes) from its mid-epoch checkpoint at step 14
# ends on the same bits as the uninterrupted run.
# Usage: cli_mpi_train.sh MPIEXEC NUMPROC_FLAG NOEIRA H5DIFF WORKDIR. Exit 77: skipped.
set -e
mpiexec=$1 flag=$2 noeira=$3 h5diff=$4 work=$5
. "$(dirname "$0")/fashion_mnist_work.sh"
common="train --limit-train 1000 --limit-test 500 --epochs 2 --batch 50 --threads 1 --log-every 5
        --policy zero3 --watchdog-timeout 60"
"$mpiexec" "$flag" 2 "$noeira" $common --out "$work/mpi" </dev/null
"$noeira" $common --sim-ranks 2 --out "$work/sim" </dev/null
"$h5diff" "$work/mpi/model.h5" "$work/sim/model.h5"
echo "mpi and simulated parameters identical"
"$mpiexec" "$flag" 2 "$noeira" $common --checkpoint-dir "$work/ckpt" --checkpoint-every 7 \
  --keep-last 0 --out "$work/mpi-ckpt" </dev/null
"$h5diff" "$work/mpi/model.h5" "$work/mpi-ckpt/model.h5"
"$mpiexec" "$flag" 2 "$noeira" $common --resume "$work/ckpt/step-00000014" \
  --out "$work/mpi-resumed" </dev/null
"$h5diff" "$work/mpi/model.h5" "$work/mpi-resumed/model.h5"
echo "mpi resume identical"
