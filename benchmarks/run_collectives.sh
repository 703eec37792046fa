#!/bin/bash
# Our MPI process group's allreduce / reduce-scatter / all-gather against the raw MPI calls, side by
# side (benchmarks/bench_collectives.cpp; issue 4, benchmark part 2), with 2 ranks by default:
#
#   benchmarks/run_collectives.sh [build-dir] [ranks] [bench_collectives flags...]
#                                            (defaults: build 2; e.g. --min-ratio 0.9)
#
# One rank per core is the fair setting: with more ranks than cores, --oversubscribe makes Open MPI
# yield in its progress loops and the figures measure the scheduler. Run it on a quiet machine.
# NOEIRA_RANKS_PER_NODE=M in the environment pretends nodes of M consecutive ranks (README,
# "Collectives across nodes"): `NOEIRA_RANKS_PER_NODE=2 run_collectives.sh build 4` times the
# node-wise path, whose messages between the pretended nodes stay on this machine.
# Exits non-zero when a result is wrong (or below --min-ratio), as the benchmark does.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
build=${1:-$here/../build}
ranks=${2:-2}
shift $(( $# < 2 ? $# : 2 ))
bench=$build/benchmarks/bench_collectives
[[ -x $bench ]] || { echo "run_collectives: $bench not built (cmake --build $build)" >&2; exit 1; }

# As root mpirun needs the first two; without ssh a single-node mpirun needs plm=isolated.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_plm=isolated
export OMP_NUM_THREADS=1
oversubscribe=()
(( ranks > $(nproc) )) && oversubscribe=(--oversubscribe)
exec mpirun -np "$ranks" "${oversubscribe[@]}" "$bench" "$@"
