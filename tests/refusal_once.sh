#!/bin/sh
# A refusal every rank of an mpirun job reaches alike — an option, the data, rank 0's output
# directory, the checkpoint to resume — is one line, said once by rank 0, and the job ends without MPI_Abort (no abort
# banner, no ORTE error log); a non-zero exit. Usage: refusal_once.sh MPIEXEC NUMPROC_FLAG NOEIRA
# WORKDIR.
set -e
mpiexec=$1 flag=$2 noeira=$3 work=$4
rm -rf "$work"
mkdir -p "$work/taken"
echo '{}' >"$work/taken/config.json"
i=0
while [ $i -lt 400 ]; do echo "a stitch in time saves nine, line $((i % 13))"; i=$((i + 1)); done \
  >"$work/corpus.txt"
text="train --data text --model gpt-tiny --text-file $work/corpus.txt --steps 2 --threads 1"
failures=0

# expect NAME FRAGMENT ARGS...: the job fails with exactly one error line, holding FRAGMENT.
expect() {
  name=$1 fragment=$2
  shift 2
  log="$work/$name.log"
  set +e
  timeout 60 "$mpiexec" "$flag" 2 "$noeira" "$@" </dev/null >"$log" 2>&1
  rc=$?
  set -e
  lines=$(grep -c '^noeira: error:' "$log" || true)
  if [ "$rc" -eq 0 ] || [ "$rc" -ge 124 ]; then
    echo "FAIL $name: exit code $rc (want a plain failure)"; failures=$((failures + 1))
  elif [ "$lines" -ne 1 ] || ! grep -q "^noeira: error: .*$fragment" "$log"; then
    echo "FAIL $name: want one error line with: $fragment, got $lines"
    sed 's/^/  | /' "$log" | head -20
    failures=$((failures + 1))
  elif grep -q "MPI_ABORT\|ORTE_ERROR_LOG" "$log"; then
    echo "FAIL $name: the job was aborted"; sed 's/^/  | /' "$log" | head -20
    failures=$((failures + 1))
  else
    echo "ok   $name: $(grep -m1 '^noeira: error:' "$log")"
  fi
}

# A checkpoint of a run on one corpus, for a resume on another of the same size.
"$mpiexec" "$flag" 2 "$noeira" $text --eval-every 2 --checkpoint-dir "$work/ck" \
  --out "$work/first" </dev/null >"$work/first.log" 2>&1 ||
  { echo "FAIL: the first run failed"; cat "$work/first.log"; exit 1; }
tac "$work/corpus.txt" >"$work/reversed.txt"

expect option "--min-lr 0.001 is above --lr 0.0001" $text --lr 1e-4 --min-lr 1e-3
expect data "missing.txt" train --data text --model gpt-tiny --text-file "$work/missing.txt"
expect out "--out $work/taken: holds another run's records (config.json)" \
  $text --out "$work/taken"
expect resume "saved by a run on other data" train --data text --model gpt-tiny \
  --text-file "$work/reversed.txt" --steps 4 --eval-every 2 --threads 1 --resume latest \
  --checkpoint-dir "$work/ck" --out "$work/resumed"
[ "$failures" -eq 0 ] || { echo "$failures case(s) failed"; exit 1; }
echo "every refusal said once, without MPI_Abort"
