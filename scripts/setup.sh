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
  libcli11-dev nlohmann-json3-dev
  dataset-fashion-mnist fortunes time
  python3-torch python3-torchvision python3-h5py python3-numpy python3-matplotlib
  slurmctld slurmd slurm-client munge
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "setup: all ${#packages[@]} packages already installed"
  exit 0
fi

if [ "$(id -u)" -ne 0 ]; then
  echo "setup: missing packages (${missing[*]}); run this script as root" >&2
  exit 1
fi

echo "setup: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}"
