# What the benchmarks of language-model runs set up alike; sourced once they have set `build`,
# `data`, `warmup` and `steps`:
#
#   source "$here/text_bench_setup.sh" NAME [FILE...]
#
# checks that noeira, bench_sgemm and every FILE are there (NAME says who complains), and sets
# noeira and bench (their paths), data_flag (noeira's flag for the corpus: a directory of text
# files or one file), work (a scratch directory removed on exit) and total (warm-up plus measured
# steps).
noeira=$build/noeira
bench=$build/benchmarks/bench_sgemm
for f in "$noeira" "$bench" "${@:2}"; do
  [[ -x $f ]] || { echo "$1: $f not built (cmake --build $build)" >&2; exit 1; }
done
if [[ -d $data ]]; then data_flag=(--data-dir "$data"); else data_flag=(--text-file "$data"); fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
total=$((warmup + steps))
