#!/bin/sh
# `kill -STOP` of one rank of `mpirun -np 2 noeira train`: the other rank's watchdog must end the
# job within seconds and name the stopped rank (its heartbeat stopped), wherever the stop caught
# it, never "ranks not arrived: unknown".
# Usage: watchdog_stop.sh MPIEXEC NUMPROC_FLAG NOEIRA WORKDIR. Exit 77: skipped.
set -e
mpiexec=$1 flag=$2 noeira=$3 work=$4
. "$(dirname "$0")/fashion_mnist_work.sh"
"$mpiexec" "$flag" 2 "$noeira" train --epochs 1000 --limit-train 500 --limit-test 100 \
  --threads 1 --log-every 1 --watchdog-timeout 2 --out "$work/run" >"$work/out" 2>"$work/err" &
job=$!
# Stop rank 1 once training runs (rank 0 has logged a step).
i=0
while [ ! -s "$work/run/metrics.jsonl" ] && [ $i -lt 600 ]; do sleep 0.1; i=$((i + 1)); done
ranks=$(pgrep -P "$job" || true)
rank1=$(echo "$ranks" | sed -n 2p)
if [ -z "$rank1" ]; then echo "FAIL: no second rank under mpiexec ($ranks)"; kill "$job"; exit 1; fi
kill -STOP "$rank1"
set +e
# The watchdog fires after 2 s and watches the heartbeats for 1 s more; 30 s is plenty.
i=0
while kill -0 "$job" 2>/dev/null && [ $i -lt 300 ]; do sleep 0.1; i=$((i + 1)); done
if kill -0 "$job" 2>/dev/null; then
  echo "FAIL: the job still runs 30 s after rank 1 stopped"
  kill -CONT "$rank1"; kill "$job"; exit 1
fi
wait "$job"
rc=$?
set -e
kill -CONT "$rank1" 2>/dev/null || true
grep "noeira: error" "$work/err" || true
[ "$rc" -ne 0 ] || { echo "FAIL: exit code 0"; exit 1; }
grep -q "seen by rank 0 of 2" "$work/err" || { echo "FAIL: rank 0 reported nothing"; exit 1; }
grep "seen by rank 0 of 2" "$work/err" | grep -q "heartbeat stopped: 1[^0-9]" ||
  { echo "FAIL: rank 1 not named"; exit 1; }
echo "the stopped rank was named"
