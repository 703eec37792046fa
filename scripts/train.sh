#!/usr/bin/env bash
# Installs what is needed, builds noeira and runs the main job: training the default MLP on
# Fashion-MNIST with the default settings. README's first command. Extra arguments go to
# `noeira train`.
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/setup.sh
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release
cmake --build build -j "$(nproc)" --target noeira
./build/noeira train "$@"
