#!/usr/bin/env bash
# Prints, one per line and sorted, the Debian/Ubuntu packages that hold the shared
# libraries the given ELF files load (as ldd resolves them), minus those every base
# image already has. The Dockerfile's runtime stage installs exactly these, so the image
# gets the runtime libraries of the -dev packages it was built with, and nothing else.
#   runtime-packages.sh build/bin/fuserank-server build/lib/libfuserank_cuda.so
# Fails when a library is not found (unless its name matches ALLOW_MISSING: the driver's
# libcuda, which the NVIDIA container runtime mounts) or belongs to no package (unless its
# path matches ALLOW_UNPACKAGED: a CUDA toolkit installed without packages; the CUDA
# runtime image has those libraries).
set -euo pipefail
ALLOW_MISSING=${ALLOW_MISSING:-'^(libcuda\.so|libnvidia-)'}
ALLOW_UNPACKAGED=${ALLOW_UNPACKAGED:-'^/usr/local/cuda'}
BASE_PACKAGES='^(libc6|libgcc-s1|libstdc\+\+6)$'
if (($# == 0)); then
  echo "usage: $0 ELF..." >&2
  exit 2
fi

ldd_out=$(for f in "$@"; do
  [[ -f "$f" ]] || { echo "runtime-packages: no such file: $f" >&2; exit 1; }
  ldd "$f"
done)

status=0
missing=$(awk '$2 == "=>" && $3 == "not" {print $1}' <<<"$ldd_out" | sort -u)
for lib in $missing; do
  if [[ ! "$lib" =~ $ALLOW_MISSING ]]; then
    echo "runtime-packages: $lib is not found (set LD_LIBRARY_PATH?)" >&2
    status=1
  fi
done

libs=$(awk '$2 == "=>" && $3 ~ /^\// {print $3}' <<<"$ldd_out" | sort -u)
# One dpkg-query for every candidate path: dpkg records /usr/lib/... while ldd may print
# /lib/... (merged /usr), and a soname link may be recorded under its target's name.
candidates=()
for lib in $libs; do
  candidates+=("$lib" "/usr$lib" "$(readlink -f "$lib")")
done
declare -A owner_of=()
if ((${#candidates[@]} > 0)); then
  while IFS= read -r line; do
    owner_of["${line#*: }"]="${line%%: /*}"  # "pkg1:amd64, pkg2:amd64: /path"
  done < <(dpkg-query -S "${candidates[@]}" 2>/dev/null || true)
fi

packages=()
for lib in $libs; do
  owner=""
  for candidate in "$lib" "/usr$lib" "$(readlink -f "$lib")"; do
    owner=${owner_of["$candidate"]:-}
    [[ -n "$owner" ]] && break
  done
  if [[ -z "$owner" && "$lib" =~ $ALLOW_UNPACKAGED ]]; then
    echo "runtime-packages: $lib belongs to no package: left to the CUDA runtime image" >&2
    continue
  elif [[ -z "$owner" ]]; then
    echo "runtime-packages: $lib belongs to no package" >&2
    status=1
    continue
  fi
  for pkg in ${owner//,/ }; do
    packages+=("${pkg%%:*}")
  done
done
((status == 0)) || exit "$status"
if ((${#packages[@]} > 0)); then
  printf '%s\n' "${packages[@]}" | sort -u | grep -Ev "$BASE_PACKAGES" || true
fi
