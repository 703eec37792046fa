#!/bin/sh
# Configures and builds one of examples/ against an installed noeira (find_package(noeira)) with
# a fresh cmake, into WORK_DIR/build.
# Usage: build_example.sh CMAKE GENERATOR C_COMPILER CXX_COMPILER PREFIX EXAMPLE_DIR WORK_DIR
set -eu
cmake=$1 generator=$2 cc=$3 cxx=$4 prefix=$5 example=$6 work=$7
mkdir -p "$work"
"$cmake" -S "$example" -B "$work/build" -G "$generator" \
  -DCMAKE_BUILD_TYPE=Release -DCMAKE_C_COMPILER="$cc" -DCMAKE_CXX_COMPILER="$cxx" \
  -DCMAKE_PREFIX_PATH="$prefix" > "$work/configure.log" || { cat "$work/configure.log"; exit 1; }
"$cmake" --build "$work/build"
