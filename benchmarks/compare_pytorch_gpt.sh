#!/bin/bash
# Side by side on this machine, in one go: `noeira train --data text --model gpt-char` and the
# same GPT shape, text, char tokens, optimizer (AdamW with noeira's text defaults: lr 1e-3 -> 1e-4
# warmup + cosine, beta2 0.99, weight decay 0.1 on matrices and embeddings, clipping 1.0), batch,
# block and threads in PyTorch (benchmarks/pytorch_gpt.py, whose model is the one
# tests/gpt_torch_check.py proves equal to noeira's); then the GEMM-bound limit of a step from the
# sgemm rate OpenBLAS reaches here (benchmarks/bench_sgemm.cpp, 1024^3).
#
# Kernels: on a CPU OpenBLAS 0.3.21 does not know (Sapphire Rapids, say) it falls back to its SSE3
# Prescott kernels, and noeira starts again with OPENBLAS_CORETYPE set from the CPU's features
# (kernels/cpu/blas_core.hpp); bench_sgemm does the same. PyTorch links the same OpenBLAS, so it
# runs twice: as shipped (the fallback, what a user gets) and with noeira's OPENBLAS_CORETYPE
# (the like-for-like figure the issue's targets are judged on).
#
#   benchmarks/compare_pytorch_gpt.sh [build-dir] [steps] [threads] [model]
#                                      (defaults: build 50 2 gpt-char)
#   environment: WARMUP=5 steps before the measured ones, BATCH=12, DATA=/usr/share/games/fortunes,
#                BLOCK=tokens per window (default: the model's block; gpt2-124m's is 1024)
#                REPEAT=1 rounds of (sgemm, noeira, PyTorch), alternating, so that a slow spell
#                of a shared machine falls on both; each round's figures, then the best round's
#                FULL=1 also trains both for FULL_STEPS=2000 steps (noeira's default run) and
#                prints both validation losses (see below)
#
# Timing: both run WARMUP + steps steps and time each step (noeira from its step records,
# --log-every 1, elapsed_s; PyTorch around batch draw, forward, backward, clip and update); the
# figures are over the measured steps only: the mean (total time / steps, what tokens/s is made
# of), the median and the best step. The windows are not the same draws in the two (each draws
# its own), the shapes are. The limit is 6·params·tokens FLOP per step (params as both count them,
# the tied table once; attention's own products are not in it) at the sgemm 1024^3 rate (the best of three repetitions).
#
# FULL=1: the validation losses after the full run, three ways: each framework's own periodic
# evaluation (noeira: its fixed set of --eval-batches windows; PyTorch: nanoGPT's estimate_loss,
# 20 batches of random windows), and both final models scored by the same torch code on the whole
# validation split (non-overlapping windows; noeira's model.h5 loaded into the torch model) — the
# like-for-like figure the issue's 0.02-nat target is judged on here.
#
# The figures are only as good as the machine is quiet: run it with nothing else on the cores.
# Exits non-zero when a run fails, the two disagree on the data or the parameter count, or a loss
# is not finite or implausible (not below ln 256 after training).
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
build=${1:-$here/../build}
steps=${2:-50}
threads=${3:-2}
model=${4:-gpt-char}
warmup=${WARMUP:-5}
batch=${BATCH:-12}
block_flag=()
[[ -n ${BLOCK:-} ]] && block_flag=(--block "$BLOCK")
data=${DATA:-/usr/share/games/fortunes}
full=${FULL:-0}
full_steps=${FULL_STEPS:-2000}
repeat=${REPEAT:-1}
python=/usr/bin/python3

source "$here/text_bench_setup.sh" compare_pytorch_gpt
export OMP_NUM_THREADS=$threads OPENBLAS_NUM_THREADS=$threads

# Others' work on the cores ruins the figures (OpenMP's waiting threads suffer most): say it.
load_before=$(cut -d' ' -f1 /proc/loadavg)
echo "== load average before: $load_before (1 min)"
awk -v l="$load_before" 'BEGIN { exit !(l > 1.0) }' &&
  echo "   warning: the machine is busy; the figures below will be slower than its own"
for ((r = 1; r <= repeat; ++r)); do
  echo "== round $r of $repeat: sgemm rate (OpenBLAS, $threads threads)"
  # Three repetitions; the best of every round is the peak (others' load only ever slows it).
  "$bench" --benchmark_filter='BM_Sgemm1024' --benchmark_format=json --benchmark_min_time=0.5 \
    --benchmark_repetitions=3 > "$work/sgemm$r.json"

  echo "== round $r: noeira train --model $model ($warmup + $steps steps, batch $batch," \
       "$threads threads)"
  "$noeira" train --data text "${data_flag[@]}" --model "$model" --batch "$batch" \
    "${block_flag[@]}" \
    --steps "$total" --eval-every "$total" --eval-batches 1 --log-every 1 --threads "$threads" \
    --out "$work/noeira$r" > "$work/noeira$r.out"
  [[ $r == 1 ]] && grep -E '^noeira train:|^  ' "$work/noeira$r.out"

  # The OpenBLAS kernels noeira ran on (its header names them): PyTorch runs once as shipped
  # (OpenBLAS's own pick) and once on the same kernels, the like-for-like figure.
  core=$(sed -n 's/.*OpenBLAS kernels \([A-Za-z0-9]*\).*/\1/p' "$work/noeira$r.out" | head -1)
  [[ -n $core ]] || { echo "compare_pytorch_gpt: noeira named no OpenBLAS kernels" >&2; exit 1; }
  echo "== round $r: PyTorch as shipped ($warmup + $steps steps, batch $batch, $threads threads)"
  env -u OPENBLAS_CORETYPE "$python" "$here/pytorch_gpt.py" train --data "$data" \
    --model "$model" --batch "$batch" "${block_flag[@]}" --steps "$total" --time-from "$warmup" \
    --threads "$threads" > "$work/torch$r.out"
  [[ $r == 1 ]] && grep -v '^{' "$work/torch$r.out"
  echo "== round $r: PyTorch with OPENBLAS_CORETYPE=$core, noeira's kernels"
  OPENBLAS_CORETYPE=$core "$python" "$here/pytorch_gpt.py" train --data "$data" \
    --model "$model" --batch "$batch" "${block_flag[@]}" --steps "$total" --time-from "$warmup" \
    --threads "$threads" > "$work/torch_core$r.out"
done
echo "$core" > "$work/core"

if [[ $full == 1 ]]; then
  every=$((full_steps % 250 == 0 ? 250 : full_steps))
  echo "== FULL: noeira train --model $model, $full_steps steps (evaluation every $every)"
  "$noeira" train --data text "${data_flag[@]}" --model "$model" --batch "$batch" \
    --steps "$full_steps" --eval-every "$every" --threads "$threads" --out "$work/full" \
    > "$work/full_noeira.out"
  grep -E '^eval [0-9]+/' "$work/full_noeira.out"
  echo "== FULL: PyTorch, $full_steps steps"
  "$python" "$here/pytorch_gpt.py" train --data "$data" --model "$model" --batch "$batch" \
    --steps "$full_steps" --eval-every "$every" --eval-batches 20 --full-val \
    --threads "$threads" > "$work/full_torch.out"
  grep -v '^{' "$work/full_torch.out"
  "$python" "$here/pytorch_gpt.py" evaluate --data "$data" --params "$work/full/model.h5" \
    --threads "$threads" > "$work/full_eval.out"
  grep -v '^{' "$work/full_eval.out"
fi

echo "== load average after: $(cut -d' ' -f1 /proc/loadavg) (1 min, this script's runs included)"
"$python" - "$work" "$full" "$batch" "$repeat" <<'PY'
import json, math, re, statistics, sys
work, full, batch, repeat = sys.argv[1], sys.argv[2] == "1", int(sys.argv[3]), int(sys.argv[4])
failures = []
core = open(f"{work}/core").read().strip()

def last_json(path):
    return json.loads(open(path).read().strip().splitlines()[-1])

def header(path):
    text = open(path).read()
    m = re.search(r"\((\d+) parameters\), text (\d+) train / (\d+) validation char tokens "
                  r"\(vocabulary (\d+)\)", text)
    if not m:
        sys.exit("compare_pytorch_gpt: no header line in " + path)
    return [int(g) for g in m.groups()]

peak = max(b["gflops"] for r in range(1, repeat + 1)
           for b in json.load(open(f"{work}/sgemm{r}.json"))["benchmarks"]
           if b["name"] == "BM_Sgemm1024/real_time" and b.get("run_type") == "iteration") * 1e9

def figures(times):
    mean = sum(times) / len(times)
    return mean, statistics.median(times), min(times)

rounds = []  # per round: {"noeira": step times, "pytorch": step times}
for r in range(1, repeat + 1):
    theirs = last_json(f"{work}/torch{r}.out")
    params, train_tokens, val_tokens, vocab = header(f"{work}/noeira{r}.out")
    if [params, train_tokens, val_tokens, vocab] != [
            theirs["params"], theirs["train_tokens"], theirs["validation_tokens"],
            theirs["vocabulary"]]:
        failures.append("the two disagree: noeira %s, pytorch %s" % (
            [params, train_tokens, val_tokens, vocab],
            [theirs[k] for k in ("params", "train_tokens", "validation_tokens", "vocabulary")]))
    block, time_from = theirs["block"], theirs["time_from"]
    records = [json.loads(l) for l in open(f"{work}/noeira{r}/metrics.jsonl")]
    elapsed = {x["step"]: x["elapsed_s"] for x in records if x["type"] == "step"}
    elapsed.setdefault(0, 0.0)
    ours = [elapsed[s] - elapsed[s - 1] for s in range(time_from + 1, max(elapsed) + 1)]
    if not all(math.isfinite(x["loss"]) for x in records if x["type"] == "step"):
        failures.append("noeira's training loss is not finite")
    rounds.append({"noeira": ours, "pytorch": theirs["step_times"],
                   "pytorch_core": last_json(f"{work}/torch_core{r}.out")["step_times"]})
tokens = batch * block
flop = 6 * params * tokens
limit = flop / peak

print()
print(f"params {params}, batch {batch} x block {block} = {tokens} tokens per step, "
      f"6*params*tokens = {flop / 1e9:.2f} GFLOP per step")
print(f"sgemm peak (1024^3, OpenBLAS {core} kernels) {peak / 1e9:.1f} GFLOP/s -> GEMM limit {1e3 * limit:.2f} ms/step "
      f"({tokens / limit:.0f} tokens/s)")

labels = {"noeira": f"noeira ({core})", "pytorch": "pytorch (as shipped)",
          "pytorch_core": f"pytorch ({core})"}

def report(label, row):
    print(label)
    for name in labels:
        mean, median, best = row[name]
        print(f"  {labels[name]:22s} {1e3 * mean:8.2f} ms/step mean (median {1e3 * median:.2f}, "
              f"best step {1e3 * best:.2f})  {tokens / mean:8.0f} tokens/s  "
              f"{limit / mean:5.1%} of the GEMM limit")
    n = row["noeira"]
    for name in ("pytorch_core", "pytorch"):
        t = row[name]
        print(f"  noeira / {labels[name]} tokens/s: {t[0] / n[0]:.2f}x mean, "
              f"{t[1] / n[1]:.2f}x median, {t[2] / n[2]:.2f}x best step")
    print("  (issue targets: >= 2x on gpt-char, >= 1.3x on gpt-small, judged on the same kernels)")

rows = [{k: figures(v) for k, v in rd.items()} for rd in rounds]
print()
for r, row in enumerate(rows, 1):
    report(f"round {r} ({len(rounds[r - 1]['noeira'])} measured steps each):", row)
if repeat > 1:
    report(f"best round of each ({repeat} rounds, by the mean):",
           {k: min((row[k] for row in rows), key=lambda f: f[0]) for k in labels})

if full:
    ours_evals = [json.loads(l) for l in open(f"{work}/full/metrics.jsonl")]
    ours_evals = [r for r in ours_evals if r["type"] == "eval"]
    full_torch = last_json(f"{work}/full_torch.out")
    full_noeira = last_json(f"{work}/full_eval.out")["full_val_loss"]
    print()
    print("validation loss    noeira (own eval)   pytorch (estimate_loss)")
    torch_by_step = {e["step"]: e["val_loss"] for e in full_torch["evals"]}
    for r in ours_evals:
        print(f"  step {r['step']:5d}     {r['val_loss']:8.4f}            "
              f"{torch_by_step.get(r['step'], float('nan')):8.4f}")
    t_ours = sum(r["train_time_s"] for r in ours_evals) / ours_evals[-1]["step"]
    t_torch = sum(full_torch["step_times"]) / len(full_torch["step_times"])
    print(f"whole run: noeira {1e3 * t_ours:.1f} ms/step, pytorch {1e3 * t_torch:.1f} ms/step "
          f"(training only, {full_torch['steps']} steps)")
    diff = full_noeira - full_torch["full_val_loss"]
    print(f"whole validation split ({val_tokens} tokens, scored by torch): noeira "
          f"{full_noeira:.4f}, pytorch {full_torch['full_val_loss']:.4f}, difference "
          f"{diff:+.4f} nats ({'within' if abs(diff) <= 0.02 else 'NOT within'} the issue's 0.02)")
    for name, value in (("noeira", full_noeira), ("pytorch", full_torch["full_val_loss"])):
        if not (math.isfinite(value) and value < math.log(256)):
            failures.append(f"{name}'s validation loss {value} is implausible: a wrong result")
for f in failures:
    print("compare_pytorch_gpt: " + f, file=sys.stderr)
sys.exit(1 if failures else 0)
PY
