#!/bin/sh
# examples/in_situ_surrogate built against the installed package and run as `mpiexec -n 3`: the
# simulation's rank keeps stepping while two ranks train the surrogate over their own
# communicator (run_train(config, comm)); the surrogate must predict the simulation's fresh output
# (R² > 0.9, which the program checks), and the run's files say two ranks trained.
# Usage: example_in_situ_surrogate.sh CMAKE GENERATOR C_COMPILER CXX_COMPILER PREFIX SOURCE_DIR
#        MPIEXEC NUMPROC_FLAG WORK_DIR
set -eu
cmake=$1 generator=$2 cc=$3 cxx=$4 prefix=$5 source=$6 mpiexec=$7 flag=$8 work=$9
rm -rf "$work"
sh "$source/tests/build_example.sh" "$cmake" "$generator" "$cc" "$cxx" "$prefix" \
  "$source/examples/in_situ_surrogate" "$work"
status=0
"$mpiexec" "$flag" 3 "$work/build/in_situ_surrogate" "$work" </dev/null > "$work/out.txt" ||
  status=$?
cat "$work/out.txt"
[ "$status" -eq 0 ] || { echo "FAILED: the program exited with $status"; exit 1; }
grep -q "^  2 ranks (mpi" "$work/out.txt" || { echo "FAILED: not two training ranks"; exit 1; }
grep -q "^surrogate on fresh simulation output" "$work/out.txt" ||
  { echo "FAILED: no evaluation on fresh output"; exit 1; }
[ -s "$work/run/model.h5" ] || { echo "FAILED: no model.h5"; exit 1; }
echo "example_in_situ_surrogate: passed"
