# What the benchmarks of `mpirun` runs of one thread per rank set up alike; sourced after
# text_bench_setup.sh:
#
#   source "$here/mpi_bench_setup.sh" NAME
#
# checks that mpirun is there (NAME says who complains), lets it run as root and without ssh on
# one machine, oversubscribes cores where ranks outnumber them, and pins every rank to one
# OpenMP / OpenBLAS thread; then prints the load and measures the machine's sgemm rate at one
# thread into $work/sgemm.json (noeira_runs.sgemm_rate reads it).
command -v mpirun > /dev/null || { echo "$1: mpirun not found" >&2; exit 1; }
if [[ $EUID -eq 0 ]]; then
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
fi
command -v ssh > /dev/null || export OMPI_MCA_plm=isolated
export OMPI_MCA_rmaps_base_oversubscribe=1 OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1

echo "== $(uptime); $(nproc) cores; MPIRUN_ARGS='${MPIRUN_ARGS:-}'"
echo "== sgemm rate (OpenBLAS, 1 thread)"
"$bench" --benchmark_filter='BM_Sgemm1024' --benchmark_format=json --benchmark_min_time=0.5 \
  --benchmark_repetitions=3 > "$work/sgemm.json"
