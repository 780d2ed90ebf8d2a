#!/usr/bin/env bash
# Prints, one per line and sorted, the Debian/Ubuntu packages that hold the shared
# libraries the given ELF files load (as ldd resolves them), minus those every base
# image already has and those the CUDA runtime base image provides. The Dockerfile's
# runtime stage installs exactly these, so the image gets the runtime libraries of the
# -dev packages it was built with, and nothing else.
#   runtime-packages.sh build/bin/fuserank-server build/lib/libfuserank_cuda.so
#   runtime-packages.sh --check-found /opt/fuserank/bin/fuserank-server ...
#
# CUDA's libraries (cuBLAS/cuBLASLt, ...) are left to the runtime image, whoever owns
# them: in nvidia/cuda's devel image they are .deb packages of NVIDIA's repository
# (libcublas-13-0), which the runtime image holds (`apt-mark hold`): installing one there
# stops the build ("Held packages were changed"), or would replace the libraries the
# module was built against. A library is left to the base image when its path, or the
# file it links to, matches LEAVE_TO_BASE_PATHS (/usr/local/cuda*), or when its owning
# package matches LEAVE_TO_BASE_PACKAGES (NVIDIA's CUDA, cuDNN, NCCL and driver packages).
# `--check-found`, run in the runtime stage, then proves the base image has them.
#
# Fails when a library is not found (unless its name matches ALLOW_MISSING: the driver's
# libcuda, which the NVIDIA container runtime mounts) or belongs to no package (unless it
# is left to the base image).
set -euo pipefail
ALLOW_MISSING=${ALLOW_MISSING:-'^(libcuda\.so|libnvidia-)'}
LEAVE_TO_BASE_PATHS=${LEAVE_TO_BASE_PATHS:-'^/usr/local/cuda'}
LEAVE_TO_BASE_PACKAGES=${LEAVE_TO_BASE_PACKAGES:-'^(cuda-|libcublas|libcufft|libcufile|libcurand|libcusolver|libcusparse|libnpp|libnvjpeg|libnvjitlink|libnvrtc|libnvfatbin|libnccl|libcudnn|nvidia-|libnvidia-)'}
BASE_PACKAGES='^(libc6|libgcc-s1|libstdc\+\+6)$'
check_found=0
if [[ "${1:-}" == "--check-found" ]]; then
  check_found=1
  shift
fi
if (($# == 0)); then
  echo "usage: $0 [--check-found] ELF..." >&2
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
if ((check_found)); then
  ((status == 0)) && echo "runtime-packages: every library of $* is found" >&2
  exit "$status"
fi

libs=$(awk '$2 == "=>" && $3 ~ /^\// {print $3}' <<<"$ldd_out" | sort -u)
declare -A real_of=()
for lib in $libs; do
  real_of["$lib"]=$(readlink -f "$lib")
done
# One dpkg-query for every candidate path: dpkg records /usr/lib/... while ldd may print
# /lib/... (merged /usr), and a soname link may be recorded under its target's name.
candidates=()
for lib in $libs; do
  candidates+=("$lib" "/usr$lib" "${real_of[$lib]}")
done
declare -A owner_of=()
if ((${#candidates[@]} > 0)); then
  while IFS= read -r line; do
    [[ "$line" == *": /"* ]] || continue
    owner_of["${line#*: }"]="${line%%: /*}"  # "pkg1:amd64, pkg2:amd64: /path"
  done < <(dpkg-query -S "${candidates[@]}" 2>/dev/null || true)
fi

packages=()
for lib in $libs; do
  if [[ "$lib" =~ $LEAVE_TO_BASE_PATHS || "${real_of[$lib]}" =~ $LEAVE_TO_BASE_PATHS ]]; then
    echo "runtime-packages: $lib (${real_of[$lib]}): left to the CUDA runtime image" >&2
    continue
  fi
  owner=""
  for candidate in "$lib" "/usr$lib" "${real_of[$lib]}"; do
    owner=${owner_of["$candidate"]:-}
    [[ -n "$owner" ]] && break
  done
  if [[ -z "$owner" ]]; then
    echo "runtime-packages: $lib belongs to no package" >&2
    status=1
    continue
  fi
  owned=()
  for pkg in ${owner//,/ }; do
    owned+=("${pkg%%:*}")
  done
  leave=0
  for pkg in "${owned[@]}"; do
    [[ "$pkg" =~ $LEAVE_TO_BASE_PACKAGES ]] && leave=1
  done
  if ((leave)); then
    echo "runtime-packages: $lib belongs to ${owned[*]}: left to the CUDA runtime image" >&2
    continue
  fi
  packages+=("${owned[@]}")
done
((status == 0)) || exit "$status"
if ((${#packages[@]} > 0)); then
  printf '%s\n' "${packages[@]}" | sort -u | grep -Ev "$BASE_PACKAGES" || true
fi
