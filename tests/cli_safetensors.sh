#!/bin/sh
# safetensors through the binary (docs/interop.md), on a few hundred Fashion-MNIST samples and on
# Debian's fortunes for a GPT:
#  - `noeira export` of model.h5 under --names noeira and --names pytorch; `noeira eval` of
#    either file gives the test accuracy and loss of model.h5 exactly;
#  - model.h5 -> pytorch names -> noeira names is byte-identical to model.h5 -> noeira names;
#  - `train --init-from` starts from the file's weights (at a learning rate of 1e-12 the epoch
#    ends where the file's model is);
#  - a GPT's export keeps its vocabulary: eval of the PyTorch-named file needs no corpus
#    tokenizer flag and gives model.h5's validation loss;
#  - errors are one line naming what is wrong: an output name without .safetensors, another
#    preset, an unknown extension, a truncated file; --help names every flag.
# Usage: cli_safetensors.sh NOEIRA WORKDIR. Exit 77: skipped.
set -e
noeira=$1 work=$2
. "$(dirname "$0")/fashion_mnist_work.sh"
common="--limit-test 100 --threads 1 --log-format json"
"$noeira" train --model mlp --limit-train 200 --epochs 1 --batch 50 $common --out "$work/run" \
  </dev/null >"$work/train.log"
"$noeira" export --params "$work/run/model.h5" --names noeira -o "$work/noeira.safetensors" \
  </dev/null >/dev/null
"$noeira" export --params "$work/run/model.h5" --names pytorch -o "$work/torch.safetensors" \
  </dev/null >/dev/null
field() { sed "s/.*\"$1\":\([^,}]*\).*/\1/"; }
want=$("$noeira" eval --params "$work/run/model.h5" $common </dev/null)
for f in noeira torch; do
  # The run's config.json given back (its empty --names included) changes nothing.
  got=$("$noeira" eval --config "$work/run/config.json" --params "$work/$f.safetensors" $common \
    </dev/null)
  for key in test_accuracy test_loss; do
    [ "$(echo "$got" | field $key)" = "$(echo "$want" | field $key)" ] ||
      { echo "FAIL: eval of $f.safetensors: $got, of model.h5: $want"; exit 1; }
  done
done
echo "eval of both exports equals eval of model.h5"

"$noeira" export --params "$work/torch.safetensors" --names noeira -o "$work/back.safetensors" \
  </dev/null >/dev/null
cmp "$work/noeira.safetensors" "$work/back.safetensors"
echo "pytorch names and back: byte-identical"

"$noeira" train --model mlp --init-from "$work/torch.safetensors" --limit-train 50 --epochs 1 \
  --batch 50 --optimizer sgd --lr 1e-12 $common --out "$work/init" </dev/null >"$work/init.log"
last=$(grep '"type":"epoch"' "$work/init.log" | tail -1)
[ "$(echo "$last" | field test_accuracy)" = "$(echo "$want" | field test_accuracy)" ] ||
  { echo "FAIL: --init-from ends its epoch at $last, the file's model is at $want"; exit 1; }
echo "train --init-from starts from the file's weights"

expect_error() {  # expect_error FRAGMENT COMMAND...: exit 1 and one line on stderr naming it
  fragment=$1
  shift
  if "$@" </dev/null >/dev/null 2>"$work/err"; then echo "FAIL: $* succeeded"; exit 1; fi
  [ "$(wc -l <"$work/err")" -eq 1 ] && grep -qF -- "$fragment" "$work/err" ||
    { echo "FAIL: $* said:"; cat "$work/err"; echo "expected one line with: $fragment"; exit 1; }
}
expect_error "a safetensors file is named <name>.safetensors" \
  "$noeira" export --params "$work/run/model.h5" -o "$work/out.bin"
expect_error "holds weights of model 'mlp', not 'linear'" \
  "$noeira" eval --params "$work/torch.safetensors" --model linear $common
expect_error "unknown weights file extension '.pt'" \
  "$noeira" train --model mlp --init-from "$work/w.pt" $common
head -c 100 "$work/torch.safetensors" >"$work/cut.safetensors"
expect_error "cut.safetensors: truncated" "$noeira" eval --params "$work/cut.safetensors" $common
echo "errors name what is wrong"
for flag in --params --checkpoint --model --format --names --source-names --out --allow-non-finite
do
  "$noeira" export --help | grep -q -- "$flag" || { echo "FAIL: export --help lacks $flag"; exit 1; }
done
"$noeira" train --help | grep -q -- "--init-from" || { echo "FAIL: no --init-from in help"; exit 1; }

if [ -d /usr/share/games/fortunes ]; then
  text="--data text --model gpt-tiny --eval-batches 2 --batch 6 --threads 1 --log-format json"
  "$noeira" train $text --steps 4 --eval-every 4 --out "$work/gpt" </dev/null >/dev/null
  "$noeira" export --params "$work/gpt/model.h5" --names pytorch -o "$work/gpt.safetensors" \
    </dev/null >/dev/null
  want=$("$noeira" eval $text --params "$work/gpt/model.h5" </dev/null | field val_loss)
  got=$("$noeira" eval $text --params "$work/gpt.safetensors" </dev/null | field val_loss)
  [ "$got" = "$want" ] ||
    { echo "FAIL: eval of the GPT's export: $got, of model.h5: $want"; exit 1; }
  echo "a GPT's export (GPT-2 names, its vocabulary) evaluates as model.h5"
fi
