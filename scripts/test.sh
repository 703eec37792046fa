#!/usr/bin/env bash
# Installs what is needed, builds noeira (Release, plus an ASan+UBSan build) and runs the whole
# test suite through ctest. README's second command; .ci/run calls it.
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/setup.sh

jobs=$(nproc)
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

echo "== Release build =="
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release
cmake --build build -j "$jobs"
ctest --test-dir build --output-on-failure -j "$jobs"

if [ "${NOEIRA_SKIP_SANITIZE:-0}" != 1 ]; then
  echo "== AddressSanitizer + UndefinedBehaviorSanitizer build =="
  # CUDA is off here: the sanitizers instrument host code only, and the GPU tests skip anyway.
  # -O1 -g1 (the level ASan's documentation recommends; line tables only) halves this build's
  # compile time against RelWithDebInfo's -O2 -g (71 s -> 35 s for src/train/generate.cpp), and
  # the reports still name file and line.
  cmake -S . -B build-sanitize -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DNOEIRA_SANITIZE=ON \
        -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g1 -DNDEBUG" -DNOEIRA_CUDA=OFF -DNOEIRA_BENCHMARKS=OFF
  cmake --build build-sanitize -j "$jobs"
  # Open MPI keeps allocations until exit by design; leak reports from it are not ours.
  ASAN_OPTIONS=detect_leaks=0:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
    ctest --test-dir build-sanitize --output-on-failure -j "$jobs" -LE slow
fi
