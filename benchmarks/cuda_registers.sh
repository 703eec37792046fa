#!/usr/bin/env bash
# Registers, stack, shared and local memory of every kernel in the CUDA plugin, as cuobjdump reads
# them from the plugin's cubins: one line per kernel. Exits 1 when a kernel
#   - has more registers than the largest block its launch uses allows (REG x __launch_bounds__
#     > 65536, the registers of a block; where no bound can be read, REG > 128, what a 512-thread
#     row kernel may have), so that the launch would fail;
#   - keeps anything in local memory (LOCAL > 0), or a stack frame (STACK) other than the known
#     ones below: a register spill lands in the stack frame, so a new or grown frame fails until
#     ptxas -v (--resource-usage) shows it holds no spill and it is added below with its reason.
# docs/design.md, "CUDA: launch bounds and reproducible library choices".
#
# Usage: benchmarks/cuda_registers.sh [PLUGIN]
#        benchmarks/cuda_registers.sh --ptxas-log BUILD_LOG
#   PLUGIN: libnoeira_cuda.so; by default build-gpu's, else build's.
#   cuobjdump: $CUOBJDUMP, else the one on PATH, else /usr/local/cuda/bin/cuobjdump.
#   --ptxas-log: where no cuobjdump is installed (a toolkit with nvcc and ptxas only), the same
#   table from a build made with -Xptxas=-v (gpu_check.sh's), which states the spills directly:
#   a kernel fails on a spill, or above 128 registers (ptxas does not print the bound; the
#   launch bound caps what it gives, so more would show as a spill).
set -euo pipefail

if [ "${1:-}" = --ptxas-log ]; then
  log=${2:?"cuda_registers: --ptxas-log needs the build log"}
  # "Compiling entry function '_Z...' for 'sm_90'", "N bytes stack frame, S bytes spill stores,
  # L bytes spill loads", "Used R registers, ... B bytes smem, ...": one line per kernel, the
  # last compile of each kept (a rebuilt object prints again).
  awk '
    /Compiling entry function/ {
      kernel = $0; sub(/.*entry function .\047?/, "", kernel); sub(/\047.*/, "", kernel)
      arch = $0; sub(/.* for .\047?/, "", arch); sub(/\047.*/, "", arch)
    }
    kernel != "" && /bytes stack frame/ { stack = $1; stores = $5; loads = $9 }
    kernel != "" && /Used [0-9]+ registers/ {
      for (i = 1; i <= NF; i++) {
        if ($(i + 1) == "registers,") reg = $i
        if ($(i + 1) == "bytes" && $(i + 2) ~ /^smem/) smem = $i
      }
      row[kernel] = sprintf("%s %s %s %s %s %s", kernel, arch, reg, stack + 0, smem + 0,
                            stores + loads)
      kernel = ""; stack = stores = loads = smem = 0
    }
    END { for (k in row) print row[k] }' "$log" | sort >"${TMPDIR:-/tmp}/ptxas_usage.$$"
  usage=${TMPDIR:-/tmp}/ptxas_usage.$$
  trap 'rm -f "$usage" "$usage.names"' EXIT
  if [ ! -s "$usage" ]; then
    echo "cuda_registers: no ptxas resource lines in $log (build with -Xptxas=-v)" >&2
    exit 2
  fi
  cut -d' ' -f1 "$usage" | c++filt >"$usage.names"
  paste -d' ' "$usage" "$usage.names" | awk '
    BEGIN { printf "%-5s %4s %5s %6s %5s  %s\n", "ARCH", "REG", "STACK", "SHARED", "SPILL", "KERNEL" }
    {
      arch = $2; reg = $3 + 0; stack = $4 + 0; shared = $5; spill = $6 + 0
      name = $0
      for (i = 1; i <= 6; i++) sub(/^[^ ]+ /, "", name)
      printf "%-5s %4d %5d %6s %5d  %s\n", arch, reg, stack, shared, spill, name
      if (spill > 0) problems[++n] = sprintf("%s: %d bytes of spill stores and loads", name, spill)
      if (reg > 128) problems[++n] = sprintf("%s: %d registers, > 128", name, reg)
    }
    END {
      for (i = 1; i <= n; i++) print "FAIL: " problems[i]
      if (n > 0) exit 1
      printf "%d kernels (ptxas): none spills, none above 128 registers\n", NR
    }'
  exit
fi

root=$(cd "$(dirname "$0")/.." && pwd)
plugin=${1:-}
if [ -z "$plugin" ]; then
  for candidate in "$root/build-gpu/libnoeira_cuda.so" "$root/build/libnoeira_cuda.so"; do
    if [ -f "$candidate" ]; then
      plugin=$candidate
      break
    fi
  done
fi
if [ -z "$plugin" ] || [ ! -f "$plugin" ]; then
  echo "cuda_registers: no CUDA plugin at ${plugin:-$root/build-gpu or $root/build}" \
       "(build the noeira_cuda target, or name the libnoeira_cuda.so)" >&2
  exit 2
fi
cuobjdump=${CUOBJDUMP:-$(command -v cuobjdump || echo /usr/local/cuda/bin/cuobjdump)}
if [ ! -x "$cuobjdump" ]; then
  echo "cuda_registers: no cuobjdump at $cuobjdump (set CUOBJDUMP to the CUDA toolkit's)" >&2
  exit 2
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# Stack frames that hold no spill (ptxas -v: 0 bytes spill stores), by a piece of the demangled
# kernel name: the most bytes allowed, and why the frame is there.
cat >"$work/known_frames" <<'EOF'
GatherPixels<	128	PixelNormalization's arrays, indexed by channel, copied from the parameters
RopeTurn	40	double sincos's argument reduction for large angles
ApplyMask	16	the Philox block's four words, indexed by column
EOF

# Launch bounds: EIATTR_MAX_THREADS (x y z) in each kernel's .nv.info section, by mangled name.
# Best effort: a kernel whose bound cannot be read is held to 128 registers below.
{ "$cuobjdump" -elf "$plugin" || true; } | awk '
  function hex(s,   v, i, c) {
    v = 0
    s = tolower(s)
    sub(/^0x/, "", s)
    for (i = 1; i <= length(s); i++) {
      c = index("0123456789abcdef", substr(s, i, 1))
      if (c == 0) return -1
      v = v * 16 + c - 1
    }
    return v
  }
  match($0, /\.nv\.info\.[^ \t]+/) { kernel = substr($0, RSTART + 9, RLENGTH - 9); next }
  /EIATTR_MAX_THREADS/ { wanted = 1; next }
  wanted && /Value:/ {
    sub(/.*Value:[ \t]*/, "")
    if (NF >= 3 && hex($1) > 0) print kernel, hex($1) * hex($2) * hex($3)
    wanted = 0
  }' >"$work/bounds"

# REG, STACK, SHARED, LOCAL per kernel and architecture, by mangled name.
"$cuobjdump" --dump-resource-usage "$plugin" | awk '
  /^arch = / { arch = $3 }
  /^ *Function / { kernel = $2; sub(/:$/, "", kernel); next }
  kernel != "" && /REG:/ {
    reg = stack = shared = local = 0
    for (i = 1; i <= NF; i++) {
      split($i, kv, ":")
      if (kv[1] == "REG") reg = kv[2]
      else if (kv[1] == "STACK") stack = kv[2]
      else if (kv[1] == "SHARED") shared = kv[2]
      else if (kv[1] == "LOCAL") local = kv[2]
    }
    print kernel, arch, reg, stack, shared, local
    kernel = ""
  }' >"$work/usage"

if [ ! -s "$work/usage" ]; then
  echo "cuda_registers: cuobjdump found no kernel in $plugin" >&2
  exit 1
fi

cut -d' ' -f1 "$work/usage" | c++filt >"$work/names"
paste -d' ' "$work/usage" "$work/names" | awk -v bounds="$work/bounds" \
    -v known="$work/known_frames" '
  BEGIN {
    while ((getline line < bounds) > 0) { split(line, b, " "); bound[b[1]] = b[2] }
    while ((getline line < known) > 0) { split(line, k, "\t"); frame[k[1]] = k[2] }
    printf "%-5s %4s %5s %6s %5s %5s  %s\n", "ARCH", "REG", "STACK", "SHARED", "LOCAL", "BOUND",
           "KERNEL"
  }
  {
    mangled = $1; arch = $2; reg = $3 + 0; stack = $4 + 0; shared = $5; local = $6 + 0
    name = $0
    for (i = 1; i <= 6; i++) sub(/^[^ ]+ /, "", name)
    limit = (mangled in bound) ? bound[mangled] : "?"
    printf "%-5s %4d %5d %6s %5d %5s  %s\n", arch, reg, stack, shared, local, limit, name
    if (limit != "?" && reg * limit > 65536) {
      problems[++n] = sprintf("%s: %d registers x %d threads > 65536", name, reg, limit)
    } else if (limit == "?" && reg > 128) {
      problems[++n] = sprintf("%s: %d registers, no launch bound read, > 128", name, reg)
    }
    if (local > 0) problems[++n] = sprintf("%s: %d bytes of local memory", name, local)
    allowed = 0
    for (piece in frame) if (index(name, piece) > 0) allowed = frame[piece]
    if (stack > allowed) {
      problems[++n] = sprintf("%s: a %d-byte stack frame (known: %d); a spill?", name, stack,
                              allowed)
    }
  }
  END {
    for (i = 1; i <= n; i++) print "FAIL: " problems[i]
    if (n > 0) exit 1
    printf "%d kernels: every one within its launch bound, no spill\n", NR
  }'
