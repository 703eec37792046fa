#!/bin/sh
# GPT-2 tokenization speed, side by side on the same text in one run: `noeira tokenize` (one
# process, one core: reading, pre-tokenization, BPE and writing the shards) against npm's
# gpt-3-encoder (Encoder.js under node, encoding only), and the same for `mpiexec -n 2`.
# Usage: benchmarks/tokenize_speed.sh [BUILD_DIR] [CORPUS] (default: build, Debian's fortunes).
set -e
build=${1:-build}
corpus=${2:-/usr/share/games/fortunes}
encoder=${NOEIRA_GPT2_VOCAB:-/usr/local/share/noeira/gpt-3-encoder}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_plm=isolated
echo "== noeira tokenize, 1 process"
"$build/noeira" tokenize -o "$work/one" "$corpus"
echo "== noeira tokenize, mpiexec -n 2"
mpiexec -n 2 "$build/noeira" tokenize -o "$work/two" "$corpus"
echo "== npm gpt-3-encoder (Encoder.js), node $(node --version)"
files=$(find -L "$corpus" -maxdepth 1 -type f ! -name '*.dat' ! -name '*.u8' ! -name '.*' | sort)
node "$(dirname "$0")/tokenize_speed.js" "$encoder" $files |
  python3 -c 'import json,sys; r=json.load(sys.stdin); print("%.1f MB, %d tokens in %.2f s: %.2f MB/s" % (r["bytes"]/1e6, r["tokens"], r["seconds"], r["bytes"]/1e6/r["seconds"]))'
