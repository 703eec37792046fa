#!/bin/sh
# The library as a package: installs this build tree into a fresh prefix, configures and builds
# examples/custom_model against it with a fresh cmake (find_package(noeira), noeira::noeira) and
# runs it; the example exits non-zero unless its test loss is finite and fell. On the way: the
# installed binary finds its plot script.
# usage: package_example.sh CMAKE GENERATOR C_COMPILER CXX_COMPILER BUILD_DIR SOURCE_DIR WORK_DIR
set -eu
cmake=$1 generator=$2 cc=$3 cxx=$4 build=$5 source=$6 work=$7
rm -rf "$work"
mkdir -p "$work"
prefix=$work/prefix

"$cmake" --install "$build" --prefix "$prefix" > "$work/install.log"
for file in bin/noeira share/noeira/plot_runs.py include/noeira/core/module.hpp \
            include/noeira/kernels/kernel_table.hpp include/noeira/train/trainer.hpp \
            lib/cmake/noeira/noeiraConfig.cmake lib/cmake/noeira/noeiraConfigVersion.cmake \
            lib/cmake/noeira/noeiraTargets.cmake lib/libnoeira_train.a; do
  [ -e "$prefix/$file" ] || { echo "FAILED: the install has no $file"; exit 1; }
done

# The installed binary finds its plot script in share/noeira: the script itself answers (about
# the missing run), not the binary's "plot_runs.py is neither in ...".
if "$prefix/bin/noeira" plot "$work/no-such-run" -o "$work/never.png" 2> "$work/plot.err"; then
  echo "FAILED: noeira plot of a missing run succeeded"
  exit 1
fi
grep -q "no-such-run: no such run directory" "$work/plot.err" ||
  { echo "FAILED: the installed noeira plot: $(cat "$work/plot.err")"; exit 1; }

"$cmake" -S "$source/examples/custom_model" -B "$work/build" -G "$generator" \
  -DCMAKE_BUILD_TYPE=Release -DCMAKE_C_COMPILER="$cc" -DCMAKE_CXX_COMPILER="$cxx" \
  -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_EXPORT_COMPILE_COMMANDS=ON > "$work/configure.log" ||
  { cat "$work/configure.log"; exit 1; }
# The example must see the installed headers, never the tree's (its roots: the source directory
# for kernels/, distributed/, io/ and src/ for the rest; the prefix may lie below them).
if grep -F -e "$source/src " -e "-I$source " -e "-isystem $source " \
     "$work/build/compile_commands.json"; then
  echo "FAILED: the example compiles with the source tree on its include path"
  exit 1
fi
"$cmake" --build "$work/build"
"$work/build/custom_model"
