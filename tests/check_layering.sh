#!/usr/bin/env bash
# Checks that every #include in kernels/, src/, distributed/ and io/ runs down the layers, the
# direction the CMake targets link in:
#
#   kernels     kernels/                                  noeira_kernels
#   nn          src/core, src/nn, src/optim, src/loss     noeira_nn
#   distributed distributed/                              noeira_distributed
#   io          io/                                       noeira_io
#   train       src/train                                 noeira_train
#   cli         src/cli                                   noeira_cli (and the noeira binary)
#
# kernels <- nn <- distributed, io <- train <- cli: a layer includes itself and what is below it;
# distributed and io do not include each other. An include is resolved as the compiler does
# (beside the including file, then the repository root, then src/) and judged by the file it
# finds, so "../train/x.hpp" counts as well as "train/x.hpp"; one that finds nothing is judged
# by its first folder when that names a layer, and skipped otherwise (a system header).
# Including a file that is in no layer (tests/, benchmarks/) is wrong from every layer, and a
# source file under the four folders that is in no layer (a new src/ folder) is reported too: give it
# a layer here and in CMakeLists.txt.
#
# Prints one line per wrong-way include (file:line: ...) and exits 1 if there is any.
# Usage: tests/check_layering.sh [ROOT]   (ROOT: the tree to check; the repository by default)
set -euo pipefail

root=${1:-$(dirname "$0")/..}
cd "$root"

declare -A below=(
  [kernels]="kernels"
  [nn]="kernels nn"
  [distributed]="kernels nn distributed"
  [io]="kernels nn io"
  [train]="kernels nn distributed io train"
  [cli]="kernels nn distributed io train cli"
)

declare -A name=(
  [kernels]="kernels" [nn]="core/nn/optim/loss" [distributed]="distributed" [io]="io"
  [train]="train" [cli]="cli"
)

# The layer of a path relative to the root, in $layer ("" when it is in none).
layer_of() {
  case $1 in
    kernels/*) layer=kernels ;;
    src/core/* | src/nn/* | src/optim/* | src/loss/*) layer=nn ;;
    distributed/*) layer=distributed ;;
    io/*) layer=io ;;
    src/train/*) layer=train ;;
    src/cli/*) layer=cli ;;
    *) layer= ;;
  esac
}

dirs=()
for d in kernels src distributed io; do [ -d "$d" ] && dirs+=("$d"); done
if [ ${#dirs[@]} -eq 0 ]; then
  echo "layering: none of kernels/, src/, distributed/, io/ under $root" >&2
  exit 2
fi

bad=0
files=0
while IFS= read -r file; do
  files=$((files + 1))
  layer_of "$file"
  if [ -z "$layer" ]; then
    echo "$file: in no layer (kernels/, src/{core,nn,optim,loss,train,cli}/, distributed/, io/)"
    bad=$((bad + 1))
  fi
done < <(find "${dirs[@]}" -type f \( -name '*.cpp' -o -name '*.hpp' -o -name '*.h' -o -name '*.cu' \
           -o -name '*.cuh' -o -name '*.inc' \) | LC_ALL=C sort)

includes=0
while IFS= read -r hit; do
  file=${hit%%:*}
  rest=${hit#*:}
  line=${rest%%:*}
  text=${rest#*:}
  layer_of "$file"
  from=$layer
  [ -n "$from" ] || continue  # reported above
  text=${text#*include}
  text=${text#"${text%%[\"<]*}"}  # drop the blanks before the quote
  quote=${text:0:1}
  target=${text:1}
  if [ "$quote" = '"' ]; then
    target=${target%%\"*}
    spelled=\"$target\"
  else
    target=${target%%>*}
    spelled="<$target>"
  fi

  # Resolve as the compiler does; <...> is not looked up beside the including file.
  found=
  if [ "$quote" = '"' ] && [ -f "${file%/*}/$target" ]; then
    found=${file%/*}/$target
  elif [ -f "$target" ]; then
    found=$target
  elif [ -f "src/$target" ]; then
    found=src/$target
  fi
  if [ -n "$found" ]; then
    case $found in
      */./* | ./* | */../* | ../*) found=$(realpath -m --relative-to=. "$found") ;;
    esac
    layer_of "$found"
    to=$layer
    if [ -z "$to" ]; then
      echo "$file:$line: #include $spelled is $found, which is in no layer"
      bad=$((bad + 1))
      continue
    fi
  else
    case ${target%%/*} in
      kernels | distributed | io | train | cli) to=${target%%/*} ;;
      core | nn | optim | loss) to=nn ;;
      *) continue ;;  # not ours
    esac
  fi
  includes=$((includes + 1))
  case " ${below[$from]} " in
    *" $to "*) ;;
    *)
      allowed=
      for l in ${below[$from]}; do allowed+="${allowed:+, }${name[$l]}"; done
      echo "$file:$line: #include $spelled runs the wrong way: ${name[$from]} includes ${name[$to]} (it may include only $allowed)"
      bad=$((bad + 1))
      ;;
  esac
done < <(grep -rnIE '^[[:space:]]*#[[:space:]]*include[[:space:]]*("[^"]+"|<[^>]+>)' "${dirs[@]}" |
         LC_ALL=C sort -t: -k1,1 -k2,2n)

if [ "$bad" -ne 0 ]; then
  echo "layering: $bad wrong-way include(s) or unlayered file(s) in $(pwd)" >&2
  exit 1
fi
echo "layering: $includes project includes in $files files all run down the layers"
