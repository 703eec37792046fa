#!/bin/sh
# GPT-2 tokens end to end through the binary:
#  - `noeira tokenize --tokenizer gpt2` of four fortunes files and the README writes llm.c
#    shards (the first the validation split), and `mpiexec -n 2 noeira tokenize` the same bytes;
#  - `--data tokens` trains gpt2-tiny (GPT-2's 50257 ids) from the mapped shards under ZeRO-3:
#    `mpiexec -n 2` saves the same parameters, bit for bit, as `--sim-ranks 2`;
#  - a run resumed from its step-3 checkpoint ends on the uninterrupted run's bits, and the
#    checkpoint resumes on 1 rank;
#  - `noeira eval` of the saved model reads the shards and gives the last validation loss;
#  - `noeira generate` decodes GPT-2's ids into text;
#  - a shard with a wrong magic, a truncated shard and an output directory that already holds
#    shards are one-line errors.
# Usage: cli_tokens.sh MPIEXEC NUMPROC_FLAG NOEIRA H5DIFF WORKDIR README. Exit 77: skipped.
set -e
mpiexec=$1 flag=$2 noeira=$3 h5diff=$4 work=$5 readme=$6
fortunes=/usr/share/games/fortunes
if [ ! -d $fortunes ]; then
  echo "skipped: the fortunes corpus is not installed (apt-get install fortunes)"
  exit 77
fi
rm -rf "$work"
mkdir -p "$work/text"
for f in art computers science love; do cp "$fortunes/$f" "$work/text/"; done
cp "$readme" "$work/text/README.md"

"$noeira" tokenize --tokenizer gpt2 --shard-tokens 100000 -o "$work/shards" "$work/text" \
  </dev/null >"$work/tokenize.log"
cat "$work/tokenize.log"
ls "$work/shards" | grep '\.bin$' >"$work/shards.list"
[ "$(head -1 "$work/shards.list")" = "text_train_000001.bin" ] &&
  grep -q "^text_val_000000.bin$" "$work/shards.list" ||
  { echo "FAIL: unexpected shards"; cat "$work/shards.list"; exit 1; }
"$mpiexec" "$flag" 2 "$noeira" tokenize --tokenizer gpt2 --shard-tokens 100000 \
  -o "$work/shards-mpi" "$work/text" </dev/null >/dev/null
for f in $(cat "$work/shards.list"); do
  cmp "$work/shards/$f" "$work/shards-mpi/$f"
done
echo "tokenize under mpiexec -n 2 wrote the same shards"

common="train --data tokens --model gpt2-tiny --block 32 --batch 4
        --steps 6 --eval-every 3 --eval-batches 2 --threads 1 --log-every 1 --policy zero3
        --watchdog-timeout 60 --log-format json"
"$mpiexec" "$flag" 2 "$noeira" $common --data-dir "$work/shards" --out "$work/mpi" \
  </dev/null >"$work/mpi.log"
"$noeira" $common --data-dir "$work/shards" --sim-ranks 2 --checkpoint-dir "$work/ckpt" \
  --checkpoint-every 3 --keep-last 0 --out "$work/sim" </dev/null >"$work/sim.log"
"$h5diff" "$work/mpi/model.h5" "$work/sim/model.h5"
echo "mpi and simulated parameters identical"
"$noeira" $common --data-dir "$work/shards" --sim-ranks 2 --resume "$work/ckpt/step-00000003" \
  --out "$work/resumed" </dev/null >/dev/null
"$h5diff" "$work/sim/model.h5" "$work/resumed/model.h5"
echo "resume identical"
"$noeira" $common --data-dir "$work/shards" --resume "$work/ckpt/step-00000003" \
  --out "$work/one" </dev/null >"$work/one.log"
grep -q '"type":"eval"' "$work/one.log" || { echo "FAIL: no evaluation on 1 rank"; exit 1; }
echo "resumed on 1 rank"
. "$(dirname "$0")/lm_eval_check.sh"
expect_eval_reproduces_last "$noeira" "$work/sim" "$work/sim.log"
text=$("$noeira" generate --params "$work/sim/model.h5" --prompt "The computer" --tokens 20 \
  --seed 3 </dev/null)
case $text in "The computer"*) ;; *) echo "FAIL: generate printed: $text"; exit 1 ;; esac
echo "generate: $text"

# Bad input: one line naming the file, a non-zero exit.
expect_error() {  # expect_error FRAGMENT COMMAND...
  fragment=$1
  shift
  if "$@" </dev/null >"$work/err.out" 2>"$work/err.log"; then
    echo "FAIL: succeeded: $*"
    exit 1
  fi
  [ "$(wc -l <"$work/err.log")" -eq 1 ] && grep -q -- "$fragment" "$work/err.log" ||
    { echo "FAIL: expected one line with '$fragment':"; cat "$work/err.log"; exit 1; }
}
cp -r "$work/shards" "$work/bad"
printf '\001\002\003\004' | dd of="$work/bad/text_val_000000.bin" bs=1 seek=0 conv=notrunc 2>/dev/null
expect_error "text_val_000000.bin: magic" "$noeira" $common --out "$work/bad-run" \
  --data-dir "$work/bad"
cp "$work/shards/text_val_000000.bin" "$work/bad/text_val_000000.bin"
size=$(stat -c %s "$work/bad/text_train_000001.bin")
truncate -s $((size - 10)) "$work/bad/text_train_000001.bin"
expect_error "text_train_000001.bin: its header says" "$noeira" $common --out "$work/bad-run" \
  --data-dir "$work/bad"
expect_error "already holds token shards" "$noeira" tokenize -o "$work/shards" "$work/text"
expect_error "reads the shards of --data-dir" "$noeira" $common --out "$work/bad-run"
expect_error "--tokenizer char: token shards hold ids" "$noeira" $common --tokenizer char \
  --data-dir "$work/shards" --out "$work/bad-run"
expect_error "--text-file applies to --data text" "$noeira" $common --text-file "$readme" \
  --data-dir "$work/shards" --out "$work/bad-run"
expect_error "the gpt2 vocabulary has 50257 ids but model 'gpt-tiny' has 256" "$noeira" train \
  --data tokens --model gpt-tiny --steps 2 --data-dir "$work/shards" --out "$work/bad-run"
echo "bad shards refused"
