#!/usr/bin/env bash
# Installs what is needed, builds noeira and runs the main job: the default MLP on Fashion-MNIST
# with the default settings, as the product is used — one MPI rank per core under mpirun, data
# parallel (DDP), with rank-sharded checkpoints. README's first command. Extra arguments go to
# `noeira train` (for example --policy zero3 or --epochs 1).
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/setup.sh
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release
cmake --build build -j "$(nproc)" --target noeira

ranks=${NP:-$(nproc)}
if [ "$(id -u)" -eq 0 ]; then
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
fi
# A single machine needs no remote launcher; without ssh on PATH Open MPI would refuse to start.
command -v ssh >/dev/null || export OMPI_MCA_plm=isolated
# Each run checkpoints into a directory of its own (a second run would find the first one's
# checkpoints in a shared one and be refused), unless the arguments name one.
checkpoints=()
case " $* " in
  *" --checkpoint-dir"*) ;;
  *) checkpoints=(--checkpoint-dir "runs/checkpoints-$(date +%Y%m%d-%H%M%S)") ;;
esac
mpirun -np "$ranks" ./build/noeira train --threads 1 "${checkpoints[@]}" "$@"
