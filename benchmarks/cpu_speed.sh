#!/bin/bash
# Every figure of the CPU performance section (README, "The MLP's epoch on the CPU" and
# "Collectives on one node") measured in one run on this machine, each beside its peer and its
# limit, then one table of the figures against the targets:
#
#   1. the MLP's epoch (1 process x 2 threads) against PyTorch 1.13's and against the step's own
#      products and Adam's update timed alone (compare_pytorch.sh);
#   2. one process of 2 threads against 2 MPI ranks of 1 thread, alternating;
#   3. peak resident memory of `noeira train --epochs 1` (/usr/bin/time -v);
#   4. allreduce, reduce-scatter and all-gather at 2 ranks against raw MPI and memcpy
#      (run_collectives.sh), and at 4 ranks when the machine has 4 cores;
#   5. DDP and ZeRO-1/2/3 at 2 MPI ranks against PyTorch DDP (compare_pytorch_ddp.sh);
#   6. real MPI runs against their --sim-ranks replays at 3, 4, 5, 6 and 8 ranks, bit for bit
#      (ctest -L, when the build has the tests).
#
#   benchmarks/cpu_speed.sh [build-dir] [log-dir]        (defaults: build, a temporary folder)
#   environment: REPEAT=2 rounds where a script alternates its sides; DATA_DIR as for the others
#
# About 4 minutes on 2 cores, plus the bit-identity tests' 2. Run it with nothing else on the
# cores: the figures are only as good as the machine is quiet, and absolute times differ between
# machines of one kind (compare within a run; the sgemm rate is printed beside them). Exits
# non-zero when a step fails; an unmet target is reported, not an error.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
build=${1:-$here/../build}
logs=${2:-$(mktemp -d)}
repeat=${REPEAT:-2}
data_dir=${DATA_DIR:-/usr/share/datasets/fashion-mnist}
noeira=$build/noeira
[[ -x $noeira ]] || { echo "cpu_speed: $noeira not built (cmake --build $build)" >&2; exit 1; }
[[ -x /usr/bin/time ]] || {
  echo "cpu_speed: /usr/bin/time not found (apt-get install time)" >&2
  exit 1
}
mkdir -p "$logs"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_plm=isolated
# noeira picks OpenBLAS's kernels from the CPU; a value a shell sets would hold PyTorch back.
unset OPENBLAS_CORETYPE

step() { echo; echo "=== $1"; }

step "1. the MLP's epoch against PyTorch and against its own products (REPEAT=$repeat)"
REPEAT=$repeat bash "$here/compare_pytorch.sh" "$build" 3 2 | tee "$logs/epoch.log"

step "2. 1 process x 2 threads against mpirun -np 2 x 1 thread (3 epochs each, $repeat rounds)"
median_epoch() {  # the median training epoch of a run's metrics file
  /usr/bin/python3 - "$1" <<'PY'
import json, statistics, sys
epochs = [json.loads(l)["epoch_time_s"] for l in open(sys.argv[1]) if '"epoch_time_s"' in l]
print(f"{statistics.median(epochs):.3f}")
PY
}
: > "$logs/threads_ranks.txt"
for ((r = 1; r <= repeat; r++)); do
  "$noeira" train --model mlp --data-dir "$data_dir" --epochs 3 --threads 2 --log-every 0 \
    --out "$logs/threads2_round$r" > /dev/null
  mpirun -np 2 "$noeira" train --model mlp --data-dir "$data_dir" --epochs 3 --threads 1 \
    --log-every 0 --out "$logs/ranks2_round$r" > /dev/null
  one=$(median_epoch "$logs/threads2_round$r/metrics.jsonl")
  two=$(median_epoch "$logs/ranks2_round$r/metrics.jsonl")
  echo "round $r: 1 x 2 threads $one s per epoch, 2 ranks x 1 thread $two s" \
    | tee -a "$logs/threads_ranks.txt"
done

step "3. peak resident memory of a one-epoch run"
/usr/bin/time -v "$noeira" train --model mlp --data-dir "$data_dir" --epochs 1 --log-every 0 \
  --out "$logs/memory" > /dev/null 2> "$logs/memory.txt"
grep -E 'Maximum resident|Elapsed' "$logs/memory.txt"

step "4. collectives against raw MPI and memcpy"
bash "$here/run_collectives.sh" "$build" 2 | tee "$logs/collectives2.log"
if (( $(nproc) >= 4 )); then
  bash "$here/run_collectives.sh" "$build" 4 | tee "$logs/collectives4.log"
else
  echo "4 ranks skipped: $(nproc) cores (with two ranks a core the figures time the scheduler;" \
    "run_collectives.sh $build 4 runs them anyway)"
fi

step "5. DDP and ZeRO at 2 ranks against PyTorch DDP"
bash "$here/compare_pytorch_ddp.sh" "$build" "$repeat" | tee "$logs/ddp.log"

step "6. real runs against their simulated replays, bit for bit"
if [[ -f $build/CTestTestfile.cmake ]] && command -v ctest > /dev/null; then
  (cd "$build" && ctest -R 'cli_mpi_sim_equal|cli_mpi_train' --output-on-failure) \
    > "$logs/sim_equal.log" 2>&1 && sim_status=passed || sim_status=FAILED
  grep -E 'tests passed|tests failed' "$logs/sim_equal.log" || true
else
  sim_status="not run (the build has no tests)"
fi

step "summary (logs in $logs)"
/usr/bin/python3 - "$logs" "$sim_status" <<'PY'
import re, statistics, sys
logs, sim_status = sys.argv[1], sys.argv[2]
read = lambda name: open(f"{logs}/{name}").read()

def last(pattern, text):
    found = re.findall(pattern, text)
    return found[-1] if found else None

rows = []
def row(what, measured, target, met):  # met None: a figure shown for what it explains
    rows.append((what, measured, target, "" if met is None else "met" if met else "NOT met"))

epoch = read("epoch.log")
sgemm = re.findall(r"sgemm peak \(1024\^3, OpenBLAS\)\s+([\d.]+)", epoch)
best = re.search(r"best over \d+ rounds: epoch ([\d.]+) s, its GEMMs ([\d.]+) s: ([\d.]+)x.*"
                 r"GEMMs \+ Adam ([\d.]+) s: ([\d.]+)x", epoch)
torch = re.search(r"median over \d+ rounds: ([\d.]+)x PyTorch on those kernels", epoch)
if best:
    row("MLP epoch / its products alone", f"{best[3]}x ({best[1]} s / {best[2]} s)", "<= 1.15x",
        float(best[3]) <= 1.15)
    row("MLP epoch / products + Adam alone", f"{best[5]}x ({best[4]} s)", "", None)
if torch:
    row("PyTorch's epoch / ours", f"{torch[1]}x", ">= 2x", float(torch[1]) >= 2)

pairs = re.findall(r"1 x 2 threads ([\d.]+) s per epoch, 2 ranks x 1 thread ([\d.]+) s",
                   read("threads_ranks.txt"))
if pairs:
    one = statistics.median(float(a) for a, _ in pairs)
    two = statistics.median(float(b) for _, b in pairs)
    row("1 x 2 threads / 2 ranks x 1", f"{one:.3f} s / {two:.3f} s", "no slower", one <= two)

rss = last(r"Maximum resident set size \(kbytes\): (\d+)", read("memory.txt"))
if rss:
    mib = int(rss) / 1024
    row("peak resident, 1 epoch", f"{mib:.0f} MiB", "<= 150 MiB", mib <= 150)

for ranks in (2, 4):
    try:
        text = read(f"collectives{ranks}.log")
    except FileNotFoundError:
        continue
    for op, target in (("allreduce", 3.0), ("reduce_scatter", 3.0), ("all_gather", 1.5)):
        m = re.search(rf"{op} at >= 1 MiB: lowest ours/raw ([\d.]+)x median", text)
        if m:
            row(f"{op} / raw MPI, >= 1 MiB, {ranks} ranks", f"{m[1]}x", f">= {target}x",
                float(m[1]) >= target)
    m = re.search(r"allreduce 1 KiB: ours ([\d.]+) us, raw MPI ([\d.]+) us", text)
    if m:
        above = float(m[1]) - float(m[2])
        row(f"1 KiB allreduce, {ranks} ranks", f"{m[1]} us (raw {m[2]}: {above:+.1f})",
            "<= 2 us above", above <= 2)

for policy, ratio in re.findall(r"^(ddp|zero1|zero2|zero3)\s+[\d.]+\s+\S+\s+[\d.]+\s+[\d.]+\s+"
                                r"([\d.]+)x", read("ddp.log"), re.M):
    row(f"PyTorch DDP / ours, {policy}, 2 ranks", f"{ratio}x", ">= 4x", float(ratio) >= 4)
row("mpirun -np N equals --sim-ranks N", sim_status, "bit for bit", sim_status == "passed")

if sgemm:
    print(f"machine: sgemm 1024^3 at 2 threads {min(sgemm)}-{max(sgemm)} GFLOP/s (OpenBLAS)")
width = max(len(r[0]) for r in rows)
mwidth = max(len(r[1]) for r in rows)
for what, measured, target, met in rows:
    print(f"{what:<{width}}  {measured:<{mwidth}}  {target:<22}  {met}")
PY
