# Sourced by the language-model CLI tests: expect_eval_reproduces_last NOEIRA RUN_DIR LOG checks
# that `noeira eval` of RUN_DIR's model.h5 (with its config.json) gives the validation loss of the
# last evaluation record in LOG (a --log-format json run).
#
# The record comes from 2 ranks, each evaluating half of the windows; eval runs them all on one.
# Kernels that round a row of a product alike whatever the number of rows (OpenBLAS's AVX-512
# ones) give the same bits; its AVX2 kernels do not, which moves a few token losses by an ulp of
# float (about 1e-9 of the mean). Anything wrong with the windows, the vocabulary or the weights
# moves it by orders of magnitude more than the 1e-7 allowed.
expect_eval_reproduces_last() {
  last=$(grep '"type":"eval"' "$3" | tail -1 | sed 's/.*"val_loss":\([^,}]*\).*/\1/')
  got=$("$1" eval --config "$2/config.json" --params "$2/model.h5" --log-format json </dev/null |
    sed 's/.*"val_loss":\([^,}]*\).*/\1/')
  awk -v a="$got" -v b="$last" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(d <= 1e-7 * b) }' ||
    { echo "FAIL: eval gives $got, the last record $last"; exit 1; }
  echo "eval reproduces the last validation loss $last (eval: $got)"
}
