#!/bin/bash
# The BLAS choice, by measurement on this machine: sgemm GFLOP/s through the same CBLAS call
# (benchmarks/blas_sgemm.cpp, built here against each library) for 1024³ and the MLP step's
# shapes (batch 100: 784→256, 256→128, 128→10 and their gradient products), with OpenBLAS's
# OpenMP build on the kernels it picks itself, on the kernels noeira picks
# (kernels/cpu/blas_core.cpp: the CPU's vector level), and with BLIS's OpenMP build (Debian's
# libblis-dev, which this script installs when it is missing and apt-get is allowed).
#
#   benchmarks/compare_blas.sh [threads]   (default 2)
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
threads=${1:-2}
arch=$(gcc -dumpmachine)
openblas=/usr/lib/$arch/openblas-openmp/libopenblas.so
blis=/usr/lib/$arch/blis-openmp/libblis.so
include=/usr/include/$arch/openblas-openmp
[[ -f $openblas ]] || { echo "compare_blas: $openblas missing (apt-get install libopenblas-openmp-dev)" >&2; exit 1; }
if [[ ! -f $blis ]]; then
  [[ $EUID -eq 0 ]] && apt-get install -y -q libblis-dev > /dev/null
  [[ -f $blis ]] || { echo "compare_blas: $blis missing (apt-get install libblis-dev)" >&2; exit 1; }
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
for lib in openblas blis; do
  path=$openblas
  [[ $lib == blis ]] && path=$blis
  g++ -O2 -std=c++20 -I"$include" "$here/blas_sgemm.cpp" -o "$work/$lib" "$path" -fopenmp \
    -Wl,-rpath,"$(dirname "$path")"
done
# noeira's pick: the header line of a tiny run names it; without a build, the CPU's AVX-512 BF16.
core=Haswell
grep -q avx512_bf16 /proc/cpuinfo && core=Cooperlake
shapes="1024x1024x1024 100x256x784 100x128x256 100x10x128 256x784x100 100x784x256 128x256x100"
export OMP_NUM_THREADS=$threads BLIS_NUM_THREADS=$threads
echo "== $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs); $threads threads"
env -u OPENBLAS_CORETYPE "$work/openblas" $shapes > "$work/openblas-own.txt"
OPENBLAS_CORETYPE=$core "$work/openblas" $shapes > "$work/openblas-core.txt"
"$work/blis" $shapes > "$work/blis.txt"
printf "%-16s %18s %22s %10s\n" "M x N x K" "OpenBLAS (own)" "OpenBLAS ($core)" "BLIS"
paste "$work/openblas-own.txt" "$work/openblas-core.txt" "$work/blis.txt" |
  awk '{ printf "%-16s %18.1f %22.1f %10.1f\n", $1, $2, $4, $6 }'
echo "(GFLOP/s, best of 20 calls; C = A·Bᵀ row-major)"
