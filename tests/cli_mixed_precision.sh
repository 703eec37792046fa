#!/bin/sh
# --precision bf16 through the binary: the mlp on Fashion-MNIST ends an epoch within 5 % of the
# fp32 run's test loss, on other parameters; then gpt-tiny on the default corpus (fortunes):
#  - `mpiexec -n 2 ... --policy zero3` saves the bits of `--sim-ranks 2`, and of DDP at 2 ranks;
#  - the norms' and GELU layers' outputs held in bfloat16 give the parameters of
#    --fp32-activations, in 0.070 MiB fewer activation bytes;
#  - the run is not the fp32 run (the products' operands were rounded), and its loss ends within
#    5 % of the fp32 run's;
#  - the saved parameters and the checkpoint's values are the fp32 masters: float32 datasets,
#    most of whose values a bfloat16 cannot hold;
#  - a run resumed from its step-7 checkpoint ends on the bits of the uninterrupted run, under
#    zero3 as it was written and under mpiexec's zero1 and ddp (the bf16 copy remade from the
#    loaded masters);
#  - with --reduce-dtype bf16 too (gradients reduced in bf16): mpiexec's bits are the simulated
#    ranks', resume is exact, and the mlp's and gpt-tiny's losses stay within 5 % of fp32's;
#  - `noeira eval` (its config.json names the precision) gives the last validation loss.
# Usage: cli_mixed_precision.sh MPIEXEC NUMPROC_FLAG NOEIRA H5DIFF WORKDIR. Exit 77: skipped.
set -e
mpiexec=$1 flag=$2 noeira=$3 h5diff=$4 work=$5
if [ ! -d /usr/share/games/fortunes ]; then
  echo "skipped: the fortunes corpus is not installed (apt-get install fortunes)"
  exit 77
fi
rm -rf "$work"
mkdir -p "$work"
loss_of() { grep "\"type\":\"$2\"" "$1" | tail -1 | sed "s/.*\"$3\":\\([^,}]*\\).*/\\1/"; }
within_5_percent() {
  awk -v a="$1" -v b="$2" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(d <= 0.05 * b) }' ||
    { echo "FAIL: $3: bf16 loss $1, fp32 $2: more than 5 % apart"; exit 1; }
  echo "$3: bf16 loss $1, fp32 $2"
}

if [ -d /usr/share/datasets/fashion-mnist ]; then
  mlp="train --model mlp --epochs 1 --limit-train 6000 --limit-test 1000 --threads 1
       --log-format json --log-every 0"
  "$noeira" $mlp --out "$work/mlp-fp32" </dev/null >"$work/mlp-fp32.log"
  "$noeira" $mlp --precision bf16 --out "$work/mlp-bf16" </dev/null >"$work/mlp-bf16.log"
  if "$h5diff" -q "$work/mlp-fp32/model.h5" "$work/mlp-bf16/model.h5" >/dev/null 2>&1; then
    echo "FAIL: the bf16 mlp saved the fp32 run's parameters"
    exit 1
  fi
  within_5_percent "$(loss_of "$work/mlp-bf16.log" epoch test_loss)" \
    "$(loss_of "$work/mlp-fp32.log" epoch test_loss)" "mlp on fashion-mnist, test loss"
  "$noeira" $mlp --precision bf16 --reduce-dtype bf16 --sim-ranks 2 --out "$work/mlp-wire" \
    </dev/null >"$work/mlp-wire.log"
  within_5_percent "$(loss_of "$work/mlp-wire.log" epoch test_loss)" \
    "$(loss_of "$work/mlp-fp32.log" epoch test_loss)" \
    "mlp on fashion-mnist, 2 ranks, bf16 products and reductions, test loss"
else
  echo "no fashion-mnist (apt-get install dataset-fashion-mnist): the mlp's comparison skipped"
fi

common="train --data text --model gpt-tiny --steps 20 --eval-every 10 --eval-batches 2 --batch 6
        --threads 1 --log-every 5 --watchdog-timeout 60 --log-format json"
bf16="$common --precision bf16"
"$mpiexec" "$flag" 2 "$noeira" $bf16 --policy zero3 --out "$work/mpi" </dev/null >"$work/mpi.log"
"$noeira" $bf16 --policy zero3 --sim-ranks 2 --out "$work/sim" </dev/null >"$work/sim.log"
"$noeira" $bf16 --policy ddp --sim-ranks 2 --out "$work/ddp" </dev/null >/dev/null
"$noeira" $common --policy zero3 --sim-ranks 2 --out "$work/fp32" </dev/null >"$work/fp32.log"
"$h5diff" "$work/mpi/model.h5" "$work/sim/model.h5"
"$h5diff" "$work/ddp/model.h5" "$work/sim/model.h5"
echo "bf16: mpi zero3, simulated zero3 and simulated ddp parameters identical"

# The norms' and GELU layers' outputs held as bfloat16 (the default) or, with --fp32-activations,
# in fp32: the same parameters, and the first step holds 2 layers x 96 rows x 6 x 32 widths x 2
# bytes = 0.070 MiB more activations in fp32.
"$noeira" $bf16 --report-memory --out "$work/held" </dev/null >"$work/held.log" 2>&1
"$noeira" $bf16 --report-memory --fp32-activations --out "$work/fp32-act" </dev/null \
  >"$work/fp32-act.log" 2>&1
"$h5diff" "$work/held/model.h5" "$work/fp32-act/model.h5"
activations_of() { grep '^\[rank 0\] memory' "$1" | sed 's/.*activations \([0-9.]*\) MiB.*/\1/'; }
held=$(activations_of "$work/held.log") fp32_act=$(activations_of "$work/fp32-act.log")
awk -v h="$held" -v f="$fp32_act" 'BEGIN { d = f - h; exit !(h > 0 && d > 0.069 && d < 0.072) }' ||
  { echo "FAIL: activations $held MiB held in bf16, $fp32_act MiB in fp32"; exit 1; }
echo "held activations: the same parameters, $held MiB of activations against $fp32_act in fp32"
if "$h5diff" -q "$work/fp32/model.h5" "$work/sim/model.h5" >/dev/null 2>&1; then
  echo "FAIL: the bf16 run saved the fp32 run's parameters"
  exit 1
fi
within_5_percent "$(loss_of "$work/sim.log" eval val_loss)" \
  "$(loss_of "$work/fp32.log" eval val_loss)" "gpt-tiny, validation loss"

"$noeira" $bf16 --policy zero3 --sim-ranks 2 --checkpoint-dir "$work/ckpt" --checkpoint-every 7 \
  --keep-last 0 --out "$work/ckpt-run" </dev/null >/dev/null
"$noeira" $bf16 --policy zero3 --sim-ranks 2 --resume "$work/ckpt/step-00000007" \
  --out "$work/resumed" </dev/null >/dev/null
"$h5diff" "$work/sim/model.h5" "$work/resumed/model.h5"
# The checkpoint holds the masters whatever policy wrote it: resumed by ZeRO-1 (masters sliced,
# the bf16 copy all-gathered after the load) and by DDP (masters whole), zero3's checkpoint ends
# on the uninterrupted run's bits; a bf16 copy not made again from the loaded masters would not.
for policy in zero1 ddp; do
  "$mpiexec" "$flag" 2 "$noeira" $bf16 --policy $policy --resume "$work/ckpt/step-00000007" \
    --out "$work/resumed-$policy" </dev/null >/dev/null
  "$h5diff" "$work/sim/model.h5" "$work/resumed-$policy/model.h5"
done
echo "bf16 resume identical (zero3, and zero3's checkpoint under mpiexec's zero1 and ddp)"
/usr/bin/python3 - "$work/sim/model.h5" "$work/ckpt/step-00000007" <<'PY'
import glob, os, sys
try:
    import h5py
    import numpy as np
except ImportError as e:
    print("no h5py or numpy (%s): the masters' check skipped" % e)
    sys.exit(0)
files = [sys.argv[1]] + sorted(glob.glob(os.path.join(sys.argv[2], "*.h5")))
for path in files:
    values = []
    def visit(name, obj):
        if isinstance(obj, h5py.Dataset) and obj.dtype.kind == "f" and obj.size > 1:
            if obj.dtype != np.float32:
                sys.exit("FAIL: %s: %s is %s, not float32" % (path, name, obj.dtype))
            if "/m/" not in "/" + name + "/" and "/v/" not in "/" + name + "/":
                values.append(np.asarray(obj, dtype=np.float32).ravel())
    with h5py.File(path, "r") as f:
        f.visititems(visit)
    if not values:
        sys.exit("FAIL: %s holds no float32 values" % path)
    v = np.concatenate(values)
    held = np.mean((v.view(np.uint32) & 0xFFFF) == 0)
    if held > 0.5:
        sys.exit("FAIL: %s: %.0f %% of its values are bfloat16s, not fp32 masters"
                 % (path, 100 * held))
    print("%s: float32, %.1f %% of %d values bfloat16-exact"
          % (os.path.basename(path), 100 * held, v.size))
PY

# bf16 on the wire as well (--reduce-dtype bf16): mpiexec trains the simulated ranks' bits, a run
# resumed from its checkpoint ends on them, the parameters are not those of fp32 reductions, and
# the loss stays within 5 % of the all-fp32 run's.
wire="$bf16 --reduce-dtype bf16 --policy zero2"
"$mpiexec" "$flag" 2 "$noeira" $wire --out "$work/wire-mpi" </dev/null >/dev/null
"$noeira" $wire --sim-ranks 2 --checkpoint-dir "$work/wire-ckpt" --checkpoint-every 7 \
  --keep-last 0 --out "$work/wire-sim" </dev/null >"$work/wire-sim.log"
"$noeira" $wire --sim-ranks 2 --resume "$work/wire-ckpt/step-00000007" \
  --out "$work/wire-resumed" </dev/null >/dev/null
"$h5diff" "$work/wire-mpi/model.h5" "$work/wire-sim/model.h5"
"$h5diff" "$work/wire-sim/model.h5" "$work/wire-resumed/model.h5"
echo "bf16 reductions: mpi, simulated and resumed parameters identical"
if "$h5diff" -q "$work/wire-sim/model.h5" "$work/sim/model.h5" >/dev/null 2>&1; then
  echo "FAIL: bf16 reductions saved the parameters of fp32 reductions"
  exit 1
fi
within_5_percent "$(loss_of "$work/wire-sim.log" eval val_loss)" \
  "$(loss_of "$work/fp32.log" eval val_loss)" "gpt-tiny with bf16 reductions, validation loss"

# bf16 gradients (--grad-dtype bf16): the run of fp32 gradients with bf16 reductions, bit for bit,
# under mpiexec's zero2 and ddp (whole bf16 gradients reduced in place) and simulated; a run
# resumed from its checkpoint ends on the same bits; --report-memory shows 2-byte gradients.
grads="$bf16 --reduce-dtype bf16 --grad-dtype bf16 --policy"
"$mpiexec" "$flag" 2 "$noeira" $grads zero2 --out "$work/grads-mpi" </dev/null >/dev/null
"$mpiexec" "$flag" 2 "$noeira" $grads ddp --out "$work/grads-ddp" </dev/null >/dev/null
"$noeira" $grads zero2 --sim-ranks 2 --checkpoint-dir "$work/grads-ckpt" --checkpoint-every 7 \
  --keep-last 0 --report-memory --out "$work/grads-sim" </dev/null >"$work/grads-sim.log" 2>&1
"$noeira" $grads zero2 --sim-ranks 2 --resume "$work/grads-ckpt/step-00000007" \
  --out "$work/grads-resumed" </dev/null >/dev/null
for run in grads-mpi grads-ddp grads-sim grads-resumed; do
  "$h5diff" "$work/wire-sim/model.h5" "$work/$run/model.h5"
done
grep -q "zero2 (bf16 params and grads," "$work/grads-sim.log" ||
  { echo "FAIL: --report-memory does not name the bf16 gradients"; exit 1; }
echo "bf16 gradients: mpi zero2 and ddp, simulated and resumed parameters are bf16 reductions' bits"

last=$(loss_of "$work/sim.log" eval val_loss)
got=$("$noeira" eval --config "$work/sim/config.json" --params "$work/sim/model.h5" \
  --log-format json </dev/null | sed 's/.*"val_loss":\([^,}]*\).*/\1/')
# 2 ranks evaluated half of the windows each, eval all on one: the products of bf16 operands
# may sum in another order for another number of rows, which moves the mean by far less than 1e-5.
awk -v a="$got" -v b="$last" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(d <= 1e-5 * b) }' ||
  { echo "FAIL: eval gives $got, the last record $last"; exit 1; }
echo "eval reproduces the last validation loss $last (eval: $got)"
