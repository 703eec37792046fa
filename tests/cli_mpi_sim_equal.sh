#!/bin/sh
# `mpiexec -n N noeira train --policy P` against `noeira train --sim-ranks N --policy P`: the saved
# parameters must be identical bit for bit (h5diff without a tolerance compares exactly), at rank
# counts where Open MPI's own reduction algorithms would add in an order other than the simulated
# backend's rank order (N >= 4; distributed/mpi_ordered_sum.hpp). 20 steps of the MLP, one thread
# per rank (OpenBLAS rounds differently at different thread counts). Each rank's --report-memory
# line must be the same in both runs too: a simulated rank holds what a real one does.
# With NOEIRA_RANKS_PER_NODE=M in the environment, across nodes of M ranks pretended on this
# machine (distributed/node_layout.hpp).
# Usage: cli_mpi_sim_equal.sh MPIEXEC NUMPROC_FLAG NOEIRA H5DIFF WORKDIR RANKS POLICY [FLAG...]
# (the flags go to both runs: --accum, --zero3-persist-below).
# Exit 77: skipped.
set -e
mpiexec=$1 flag=$2 noeira=$3 h5diff=$4 work=$5 ranks=$6 policy=$7
shift 7
. "$(dirname "$0")/fashion_mnist_work.sh"
common="train --limit-train 800 --limit-test 100 --epochs 1 --batch 40 --threads 1 --log-every 10
        --policy $policy --watchdog-timeout 60 --report-memory $*"
# NOEIRA_RANKS_PER_NODE=M pretends nodes of M consecutive ranks to mpiexec's run; the simulated
# run is told the same, and both headers must name those nodes (neither run may ignore them).
per_node=${NOEIRA_RANKS_PER_NODE:+--sim-ranks-per-node $NOEIRA_RANKS_PER_NODE}
"$mpiexec" "$flag" "$ranks" "$noeira" $common --out "$work/mpi" </dev/null >"$work/mpi.log"
"$noeira" $common --sim-ranks "$ranks" $per_node --out "$work/sim" </dev/null >"$work/sim.log"
"$h5diff" "$work/mpi/model.h5" "$work/sim/model.h5"
echo "mpi and simulated parameters identical at $ranks ranks with $policy $* $per_node"
if [ -n "$per_node" ]; then
  for run in mpi sim; do
    grep -q "^  $ranks ranks ([a-z]*, [0-9]* nodes of " "$work/$run.log" ||
      { echo "FAIL: the $run run's header names no nodes"; head -3 "$work/$run.log"; exit 1; }
  done
  [ "$(sed -n 's/^  [0-9]* ranks ([a-z]*, \([^)]*\)).*/\1/p' "$work/mpi.log")" = \
    "$(sed -n 's/^  [0-9]* ranks ([a-z]*, \([^)]*\)).*/\1/p' "$work/sim.log")" ] ||
    { echo "FAIL: the runs name other nodes"; head -2 "$work/mpi.log" "$work/sim.log"; exit 1; }
fi
# The processes' lines reach mpiexec's output in any order: compare them sorted.
grep '^\[rank [0-9]*\] memory' "$work/mpi.log" | sort >"$work/mpi.memory"
grep '^\[rank [0-9]*\] memory' "$work/sim.log" | sort >"$work/sim.memory"
[ "$(wc -l <"$work/sim.memory")" -eq "$ranks" ] ||
  { echo "FAIL: $ranks memory lines expected from the simulated run"; cat "$work/sim.log"; exit 1; }
diff "$work/mpi.memory" "$work/sim.memory" ||
  { echo "FAIL: the simulated ranks report other memory than mpiexec's (<)"; exit 1; }
echo "and every rank's memory report the same"
