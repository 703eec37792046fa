#!/usr/bin/env bash
# Carries noeira's Debian build and test dependencies to a GPU machine that has no network.
#
#   bash benchmarks/gpu_deps.sh fetch            # here, with Debian's apt: .deb files into .gpu-deps/debs
#   bash benchmarks/gpu_deps.sh unpack [PREFIX]  # there, offline: unpack into PREFIX (default
#                                                # /opt/noeira-deps) and write .gpu-deps/env.sh
#   . .gpu-deps/env.sh && cmake -S . -B build-gpu $NOEIRA_CMAKE_ARGS ...
#
# fetch takes the packages scripts/setup.sh installs for the build and the tests, and the run-time
# libraries they pull in, less what any machine with a C++ compiler already has (libc, libstdc++,
# libgomp, OpenSSL, libcurl: see `skip`). GPU_DEPS_EXTRA="pkg ..." adds packages (taken even when
# the skip list names them; their dependencies are not).
#
# unpack never writes under / (packages unpacked there can break the machine's own tools): it runs
# dpkg -x into PREFIX, then does by hand what Debian's maintainer scripts and its absolute /usr
# paths would have done: update-alternatives links (mpicc, mpiexec, h5pcc, libopenblas.so.0),
# Open MPI's and PMIx's install paths, h5pcc, OpenBLAS's CMake config, pkg-config files.
set -euo pipefail
caller_dir=$PWD
cd "$(dirname "$0")/.."
repo=$PWD
deps_dir=$repo/.gpu-deps
debs_dir=$deps_dir/debs
triplet=x86_64-linux-gnu

roots=(
  openmpi-bin libopenmpi-dev           # mpicc, mpicxx, mpiexec, libmpi
  libhdf5-openmpi-dev                  # parallel HDF5 (h5pcc); not hdf5-tools: h5diff is for
                                       # ctest's CLI tests, which gpu_check.sh does not run
  libopenblas-openmp-dev               # the OpenMP build of OpenBLAS that CMakeLists.txt requires
  libdnnl-dev ocl-icd-opencl-dev       # oneDNN (the CPU's products); its CMake package requires
                                       # OpenCL (Debian builds its GPU runtime on it)
  zlib1g-dev libgtest-dev libgmock-dev libbenchmark-dev libcli11-dev nlohmann-json3-dev
  fortunes                             # the default text corpus of the GPT runs
)
# Fashion-MNIST travels as a slice: its package is 30 MiB, half of what a carry can take. The
# 10,000 test images are split into 8,000 to train on and 2,000 to test (fashion_slice below).
fashion_package=dataset-fashion-mnist
fashion_train=8000

# Packages the dependency walk stops at (whole-name extended regexes).
skip=(
  # The compiler and its run-time libraries: the machine has g++ (nvcc needs it), and an older
  # libgomp or libstdc++ ahead of its own breaks what its newer g++ compiles.
  'gcc.*' 'g\+\+.*' 'cpp.*' 'gfortran.*' 'flang.*' 'clang.*' 'llvm.*' 'binutils.*'
  'lib(flang|llvm|clang|mlir|binutils|ctf|gprofng|isl|mpc|mpfr|gmp|z3|cc1|objc).*'
  'lib(asan|tsan|lsan|ubsan|hwasan|itm|atomic|gomp|quadmath|gcc|stdc\+\+).*' 'libgfortran-.*'
  'libc6.*' 'libc-dev-bin' 'linux-libc-dev' 'lib(crypt|nsl|tirpc).*' 'rpcsvc-proto'
  # The base system of any Debian or Ubuntu image.
  'perl.*' 'libperl.*' 'dpkg' 'debconf.*' 'cdebconf' 'tar' 'passwd' 'adduser' 'debianutils'
  'install-info' 'readline-common' 'lib(readline|tinfo|selinux|semanage|sepol|pam|audit).*'
  'lib(cap-ng|acl|attr|md0|bsd0|pcre|lzma|zstd|bz2|db5|gdbm|sqlite3|uuid|ffi).*'
  # TLS and network libraries: libhdf5 needs libcurl.so.4 and libcrypto.so.3, which an image
  # with curl or Python has; unpack names any that are missing.
  'lib(ssl|curl|nghttp2|rtmp|ssh2|psl|brotli|ldap|sasl2|krb5|k5crypto|gssapi|com-err).*'
  'lib(keyutils|nss3|nspr4|cbor|fido2|gnutls|nettle|hogweed|idn2|unistring|p11-kit|tasn1).*'
  'nss-plugin.*' 'openssh.*'
  # Pulled in by -dev packages for what noeira never uses (X11, JPEG, Fortran HDF5, autotools,
  # hwloc's PCI/OpenCL plugins, GoogleTest's sources) or headers that ours do not include.
  'lib(x11|xcb|xau|xdmcp|xext|xnvctrl|js-|edit|xml2|icu|jansson|jpeg|pciaccess|ltdl).*'
  'lib(newt|slang|textwrap|debian-installer).*' 'autoconf' 'automake'
  'autotools-dev' 'm4' 'googletest' 'libhwloc-plugins' 'libhdf5-openmpi-(hl-)?fortran.*'
  'lib(hwloc|event|pmix|ibverbs|numa)-dev' 'libnl-.*-dev'
  # Open MPI's InfiniBand, Omni-Path and libfabric transports: one node needs only shared memory
  # (Debian's own parameter file already turns UCX, verbs and OFI off; env.sh adds PSM).
  'lib(ucx|fabric|psm|ibverbs|rdmacm|numa|nl-route).*' 'ibverbs-providers'
)

die() { echo "gpu_deps: $*" >&2; exit 1; }

skipped() {
  local p
  for p in "${skip[@]}"; do
    [[ $1 =~ ^($p)$ ]] && return 0
  done
  return 1
}

# Direct Depends/PreDepends of the given packages, one name a line; a virtual package yields its
# providers, and both sides of an alternative are taken (the skip list cuts what is not needed).
direct_depends() {
  apt-cache depends --no-recommends --no-suggests --no-conflicts --no-breaks --no-replaces \
    --no-enhances "$@" | awk '
      /^ [ |](Pre)?Depends: / { name = $2; sub(/:.*/, "", name)
                                virtual = (name ~ /^</); if (!virtual) print name; next }
      /^    / && virtual      { name = $1; sub(/:.*/, "", name); print name; next }
      { virtual = 0 }'
}

fetch() {
  command -v apt-get >/dev/null || die "fetch needs Debian's apt-get (run it on a Debian machine)"
  [ "$(dpkg --print-architecture)" = amd64 ] || die "fetch must run on amd64: the GPU machine is x86-64"
  local -a wanted=("${roots[@]}")
  # shellcheck disable=SC2206  # a space-separated list of package names
  [ -z "${GPU_DEPS_EXTRA:-}" ] || wanted+=(${GPU_DEPS_EXTRA})
  local p
  for p in "${wanted[@]}"; do
    apt-cache show "$p" >/dev/null 2>&1 ||
      die "apt knows no package '$p': run 'apt-get update' (as root) first"
  done

  # Breadth-first walk of the dependencies, stopping at the skip list.
  local -A seen=()
  local -a level=("${wanted[@]}") next
  for p in "${wanted[@]}"; do seen[$p]=1; done
  while [ ${#level[@]} -gt 0 ]; do
    next=()
    while read -r p; do
      if [ -z "$p" ] || [ -n "${seen[$p]:-}" ]; then continue; fi
      seen[$p]=1
      skipped "$p" || next+=("$p")
    done < <(direct_depends "${level[@]}")
    level=("${next[@]}")
  done
  local -a take=()
  for p in "${!seen[@]}"; do
    if ! skipped "$p" || [[ " ${wanted[*]} " == *" $p "* ]]; then take+=("$p"); fi
  done
  mapfile -t take < <(printf '%s\n' "${take[@]}" | sort)

  # Download into a fresh folder and swap it in only when every package came.
  rm -rf "$debs_dir.new"
  mkdir -p "$debs_dir.new"
  echo "gpu_deps: downloading ${#take[@]} packages"
  (cd "$debs_dir.new" && apt-get download -q -o APT::Sandbox::User=root "${take[@]}" >/dev/null) ||
    die "apt-get download failed (is 'apt-get update' current?)"
  rm -rf "$debs_dir"
  mv "$debs_dir.new" "$debs_dir"
  fashion_slice

  local f total=0 size
  for f in "$debs_dir"/*.deb; do
    size=$(stat -c %s "$f")
    printf '%8.1f KiB  %s\n' "$(awk -v s="$size" 'BEGIN { print s / 1024 }')" "${f##*/}"
  done | sort -n
  for f in "$debs_dir"/*.deb; do total=$((total + $(stat -c %s "$f"))); done
  local mib
  mib=$(awk -v s="$total" 'BEGIN { printf "%.1f", s / 1048576 }')
  echo "gpu_deps: ${#take[@]} packages, $mib MiB in ${debs_dir#"$repo"/}"
  # The device tool carries 64 MiB in all, the repository included: keep 10 MiB of margin for a
  # point release that grows a package.
  if [ "$total" -gt $((50 * 1048576)) ]; then
    echo "gpu_deps: warning: over 50 MiB: with the repository, too close to what a carry can take" >&2
  fi
  echo "gpu_deps: carry .gpu-deps/debs and .gpu-deps/fashion-mnist, then run there:" \
       "bash benchmarks/gpu_check.sh build"
}

# .gpu-deps/fashion-mnist: IDX files as Debian's package holds them (gzip), the package's test
# set split into train-* (the first $fashion_train) and t10k-* (the rest).
fashion_slice() {
  local tmp out=$deps_dir/fashion-mnist
  tmp=$(mktemp -d)
  (cd "$tmp" && apt-get download -q -o APT::Sandbox::User=root "$fashion_package" >/dev/null) ||
    die "apt-get download $fashion_package failed"
  dpkg-deb -x "$tmp"/*.deb "$tmp/x"
  rm -rf "$out.new"
  mkdir -p "$out.new"
  python3 - "$tmp/x/usr/share/datasets/fashion-mnist" "$out.new" "$fashion_train" <<'PY'
import gzip, struct, sys
src, dst, n_train = sys.argv[1], sys.argv[2], int(sys.argv[3])
for kind, magic in (("images-idx3", 2051), ("labels-idx1", 2049)):
    data = gzip.open(f"{src}/t10k-{kind}-ubyte.gz").read()
    dims = data[3]
    header = struct.unpack(f">I{dims}I", data[:4 + 4 * dims])
    assert header[0] == magic, f"t10k-{kind}: magic {header[0]}"
    count, rest = header[1], header[2:]
    item = 1
    for d in rest:
        item *= d
    body = data[4 + 4 * dims:]
    assert len(body) == count * item, f"t10k-{kind}: {len(body)} bytes"
    for name, first, last in (("train", 0, n_train), ("t10k", n_train, count)):
        with gzip.open(f"{dst}/{name}-{kind}-ubyte.gz", "wb", compresslevel=9) as f:
            f.write(struct.pack(f">I{dims}I", magic, last - first, *rest))
            f.write(body[first * item:last * item])
PY
  rm -rf "$out" "$tmp"
  mv "$out.new" "$out"
  echo "gpu_deps: Fashion-MNIST slice ($fashion_train train, $((10000 - fashion_train)) test" \
       "images), $(du -sk "$out" | cut -f1) KiB in ${out#"$repo"/}"
}

# Where the machine has no dpkg-deb: a .deb is an ar archive of control.tar.* and data.tar.*.
ar_member() {  # ar_member DEB NAME [TAR ARGS...]: untar member NAME.tar.* of DEB
  local deb=$1 name=$2 member
  shift 2
  member=$(ar t "$deb" | grep "^$name\.tar")
  case $member in
    *.xz) ar p "$deb" "$member" | tar -x -J "$@" ;;
    *.zst) ar p "$deb" "$member" | tar -x --zstd "$@" ;;
    *.gz) ar p "$deb" "$member" | tar -x -z "$@" ;;
    *) ar p "$deb" "$member" | tar -x "$@" ;;
  esac
}

extract() {  # extract DEB DIR
  if command -v dpkg-deb >/dev/null; then
    dpkg-deb -x "$1" "$2"
  else
    ar_member "$1" data -C "$2"
  fi
}

postinst() {  # the maintainer script of DEB on stdout (empty if it has none)
  if command -v dpkg-deb >/dev/null; then
    dpkg-deb -I "$1" postinst 2>/dev/null || true
  else
    ar_member "$1" control -O ./postinst 2>/dev/null || true
  fi
}

# The links that update-alternatives would make (--install LINK NAME PATH PRIO, --slave LINK NAME
# PATH), made inside the prefix when the target is there. Only literal paths: a script's computed
# ones are the hdf5-mpi.pc dance, which needs no link here.
make_alternatives() {
  local prefix=$1 deb line link target
  for deb in "$debs_dir"/*.deb; do
    while read -r line; do
      set -f
      # shellcheck disable=SC2086  # split the command into its words
      set -- $line
      set +f
      while [ $# -ge 4 ]; do
        case $1 in
          --install | --slave)
            link=$2 target=$4
            if [ "$1" = --install ]; then shift 5 || shift $#; else shift 4; fi
            [[ $link == /* && $target == /* && $link$target != *'$'* ]] || continue
            if { [ -e "$prefix$target" ] || [ -L "$prefix$target" ]; } &&
               ! { [ -e "$prefix$link" ] || [ -L "$prefix$link" ]; }; then
              mkdir -p "$(dirname "$prefix$link")"
              # Relative and unresolved, as Debian's: mpicc -> mpicc.openmpi.
              ln -s "$(realpath -s -m --relative-to="$(dirname "$prefix$link")" "$prefix$target")" \
                "$prefix$link"
            fi ;;
          *) shift ;;
        esac
      done
    done < <(postinst "$deb" | sed -e ':a' -e '/\\$/{N;s/\\\n/ /;ba}' |
             grep -E 'update-alternatives.*--install' || true)
  done
}

# Some Debian 12 packages still install under /lib (libnl, libudev, zlib): move them to usr/ as a
# merged-/usr system has them, and point absolute links (libz.so -> /lib/...) into the prefix.
merge_usr() {
  local prefix=$1 d link target
  for d in bin sbin lib lib64; do
    if [ -d "$prefix/$d" ] && [ ! -L "$prefix/$d" ]; then
      mkdir -p "$prefix/usr/$d"
      cp -a "$prefix/$d/." "$prefix/usr/$d/"
      rm -rf "${prefix:?}/$d"
    fi
  done
  while IFS= read -r -d '' link; do
    target=$(readlink "$link")
    [[ $target == /usr/* ]] || target=/usr$target
    if [ -e "$prefix$target" ]; then
      ln -sfn "$(realpath -s -m --relative-to="$(dirname "$link")" "$prefix$target")" "$link"
    fi
  done < <(find "$prefix/usr" -type l -lname '/*' -print0)
}

# Libraries for LD_LIBRARY_PATH: the ones of noeira's own stack always (HDF5 aborts when its
# headers and library differ in version; Open MPI's parts must match each other), the others only
# where the machine lacks them, so that no older copy hides a newer one from the machine's tools.
make_runtime_lib() {
  local prefix=$1 f name path
  local lib=$prefix/usr/lib/$triplet dir=$prefix/runtime-lib
  local -A host=()
  while read -r name path; do
    [ -s "$path" ] && host[$name]=1
  done < <({ ldconfig -p || /sbin/ldconfig -p; } 2>/dev/null | awk '/x86-64/ { print $1, $NF }')
  mkdir -p "$dir"
  for f in "$lib"/lib*.so.*; do
    name=${f##*/}
    if [[ $name =~ ^lib(mpi|open-pal|open-rte|mca_common|ompitrace|oshmem|hdf5|pmix|openblas|benchmark|sz|aec)[._-] ]] ||
       [ -z "${host[$name]:-}" ]; then
      ln -s "$f" "$dir/$name"
    fi
  done
}

unpack() {
  local prefix=${1:-/opt/noeira-deps}
  [[ $prefix == /* ]] || prefix=$caller_dir/$prefix
  prefix=$(realpath -m "$prefix")
  [[ ! $prefix =~ [[:space:]] ]] || die "prefix '$prefix' has white space (NOEIRA_CMAKE_ARGS is split on it)"
  compgen -G "$debs_dir/*.deb" >/dev/null || die "no .deb files in $debs_dir: run 'gpu_deps.sh fetch' and carry .gpu-deps/debs"
  if [ -e "$prefix" ]; then
    if [ -f "$prefix/.noeira-gpu-deps" ]; then
      rm -rf "$prefix"  # ours from an earlier unpack: start clean, so the fixes below apply once
    elif [ -n "$(ls -A "$prefix")" ]; then
      die "$prefix exists and is not an earlier unpack: choose another prefix"
    fi
  fi
  mkdir -p "$prefix"
  touch "$prefix/.noeira-gpu-deps"
  local deb n=0
  for deb in "$debs_dir"/*.deb; do
    extract "$deb" "$prefix"
    n=$((n + 1))
  done
  local usr=$prefix/usr lib=$prefix/usr/lib/$triplet
  merge_usr "$prefix"
  make_alternatives "$prefix"

  # h5pcc: its prefix, and no -lcrypto -lcurl. Those are for static linking; FindHDF5 turns every
  # -l into a find_library, and their -dev links are not carried (the shared libhdf5 loads both).
  # Shared by default too: FindHDF5 first builds a test program with the default.
  sed -i -e "s|^prefix=\"/usr\"|prefix=\"$usr\"|" -e '/^H5BLD_LIBS=/s/-lcrypto -lcurl //' \
    -e 's/HDF5_USE_SHLIB:-no/HDF5_USE_SHLIB:-yes/' "$usr/bin/h5pcc.openmpi"
  # OpenBLAS's CMake config names absolute /usr paths.
  sed -i "s|/usr/|$usr/|g" "$lib/openblas-openmp/cmake/openblas/OpenBLASConfig.cmake"
  # PMIx finds its plugins through this file (under the PMIX_SYSCONFDIR that env.sh sets).
  sed -i "s|/usr/|$usr/|g" "$lib/pmix2/share/pmix-mca-params.conf"
  # pkg-config files: absolute /usr paths after =, a space, -I or -L.
  find "$prefix" -name '*.pc' -type f -exec sed -i -E "s#(^|[=[:space:]]|-I|-L)/usr(/|\$)#\1$usr\2#g" {} +
  make_runtime_lib "$prefix"

  local ld_path=$prefix/runtime-lib:$lib/openmpi/lib:$lib/pmix2/lib
  cat >"$deps_dir/env.sh" <<EOF
# Written by benchmarks/gpu_deps.sh unpack: noeira's build dependencies, unpacked under $prefix.
# Source it (. .gpu-deps/env.sh), then pass \$NOEIRA_CMAKE_ARGS to cmake.
if [ ! -x "$usr/bin/mpiexec" ]; then
  echo "gpu_deps: $prefix is missing: run 'bash benchmarks/gpu_deps.sh unpack $prefix'" >&2
  return 1 2>/dev/null || exit 1
fi
export PATH="$usr/bin\${PATH:+:\$PATH}"
export LD_LIBRARY_PATH="$ld_path\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH}"
export CMAKE_PREFIX_PATH="$usr\${CMAKE_PREFIX_PATH:+:\$CMAKE_PREFIX_PATH}"
export PKG_CONFIG_PATH="$lib/pkgconfig:$usr/share/pkgconfig\${PKG_CONFIG_PATH:+:\$PKG_CONFIG_PATH}"
# Open MPI finds its components, wrapper data and help texts under OPAL_PREFIX; its system
# parameter file (which turns off the InfiniBand/UCX/OFI transports) is not at /etc here.
export OPAL_PREFIX="$usr"
export OMPI_MCA_mca_base_param_files="$prefix/etc/openmpi/openmpi-mca-params.conf"
# The transports whose libraries fetch leaves out, so that Open MPI does not try to load them.
export OMPI_MCA_mtl="\${OMPI_MCA_mtl:-^ofi,psm,psm2}"
# PMIx was built with absolute install paths; PMIX_PREFIX alone does not move them.
export PMIX_PREFIX="$lib/pmix2" PMIX_LIBDIR="$lib/pmix2/lib" PMIX_SYSCONFDIR="$lib/pmix2/share"
export PMIX_DATAROOTDIR="$lib/pmix2/share" PMIX_DATADIR="$lib/pmix2/share"
export DATA_DIR="$deps_dir/fashion-mnist"
export TEXT_DIR="$usr/share/games/fortunes"
# Explicit hints, so that the prefix wins over anything the machine has under /usr.
export NOEIRA_CMAKE_ARGS="-DMPI_C_COMPILER=$usr/bin/mpicc -DMPI_CXX_COMPILER=$usr/bin/mpicxx \
-DMPIEXEC_EXECUTABLE=$usr/bin/mpiexec -DHDF5_ROOT=$usr -DHDF5_C_COMPILER_EXECUTABLE=$usr/bin/h5pcc \
-DOpenBLAS_DIR=$lib/openblas-openmp/cmake/openblas -DZLIB_ROOT=$usr -DGTest_DIR=$lib/cmake/GTest \
-Dbenchmark_DIR=$lib/cmake/benchmark -DCLI11_DIR=$usr/share/cmake/CLI11 \
-Dnlohmann_json_DIR=$usr/share/cmake/nlohmann_json -Ddnnl_DIR=$lib/cmake/dnnl \
-DOpenCL_INCLUDE_DIR=$usr/include -DOpenCL_LIBRARY=$lib/libOpenCL.so"
EOF
  echo "gpu_deps: unpacked $n packages into $prefix; wrote ${deps_dir#"$repo"/}/env.sh"

  # What the machine lacks shows here, not as a link or load error halfway through the build.
  local missing f
  missing=$(for f in "$usr/bin/orterun" "$usr/bin/orted" \
                     "$lib/libhdf5_openmpi.so.103" "$lib/libmpi_cxx.so.40" \
                     "$lib/openblas-openmp/libopenblas.so.0" "$lib/libdnnl.so.2"; do
              LD_LIBRARY_PATH=$ld_path${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} ldd "$f" 2>&1 || true
            done | awk '/=> not found/ { print $1 }
                        /error while loading shared libraries: / {
                          sub(/.*shared libraries: /, ""); sub(/:.*/, ""); sub(/.*\//, ""); print }' |
            sort -u | tr '\n' ' ')
  if [ -n "$missing" ]; then
    echo "gpu_deps: this machine lacks ${missing% }. On the fetch machine, 'dpkg -S NAME' names" \
         "their packages; add them (and their own missing ones) with GPU_DEPS_EXTRA=\"pkg ...\"" \
         "gpu_deps.sh fetch" >&2
    return 1
  fi
  local tool
  for tool in g++ cmake; do
    command -v "$tool" >/dev/null || echo "gpu_deps: warning: no $tool on PATH" >&2
  done
}

case ${1:-} in
  fetch) fetch ;;
  unpack) shift; unpack "$@" ;;
  *) echo "usage: $0 fetch | unpack [PREFIX]" >&2; exit 2 ;;
esac
