#!/usr/bin/env bash
# Installs the Debian packages crucible needs (only the missing ones), then
# configures and builds it with CMake + Ninja.
#   scripts/setup.sh                 Release build in build/
#   scripts/setup.sh --preset asan   ASan/UBSan build in build-asan/
set -euo pipefail

preset=default
while [[ $# -gt 0 ]]; do
  case "$1" in
    --preset) preset="${2:?--preset needs a name (default or asan)}"; shift 2 ;;
    --preset=*) preset="${1#--preset=}"; shift ;;
    -h|--help) sed -n '2,6p' "$0"; exit 0 ;;
    *) echo "[setup] unknown argument: $1" >&2; exit 2 ;;
  esac
done
case "$preset" in
  default) build_dir=build ;;
  asan) build_dir=build-asan ;;
  *) echo "[setup] unknown preset '$preset' (expected default or asan)" >&2; exit 2 ;;
esac

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

packages=(
  build-essential cmake ninja-build pkg-config
  libdnnl-dev ocl-icd-opencl-dev libopenmpi-dev openmpi-bin libsentencepiece-dev libtomlplusplus-dev
  nlohmann-json3-dev libcli11-dev libfmt-dev libspdlog-dev libxxhash-dev libhwloc-dev libicu-dev libsimdjson-dev
  prometheus-cpp-dev libcpp-httplib-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  fortunes python3 python3-numpy python3-torch python3-venv libopenblas0-pthread
  clang libclang-rt-14-dev
  chromium-headless-shell
  slurm-wlm munge
  libquantlib0-dev libnetcdf-dev netcdf-bin lammps
)

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q '^install ok installed$'; then
    missing+=("$p")
  fi
done

if [[ ${#missing[@]} -gt 0 ]]; then
  echo "[setup] installing ${#missing[@]} missing package(s): ${missing[*]}"
  sudo=()
  if [[ $(id -u) -ne 0 ]]; then
    if ! command -v sudo >/dev/null; then
      echo "[setup] not root and sudo is unavailable; install as root: apt-get install ${missing[*]}" >&2
      exit 1
    fi
    sudo=(sudo)
  fi
  "${sudo[@]}" apt-get update -q
  "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive \
    apt-get install -y -q --no-install-recommends "${missing[@]}"
else
  echo "[setup] all ${#packages[@]} packages present"
fi

jobs="$(nproc 2>/dev/null || echo 2)"
echo "[setup] configuring preset '$preset' in $build_dir/"
cmake --preset "$preset" >/dev/null
echo "[setup] building ($jobs jobs)"
cmake --build --preset "$preset" -j "$jobs"
echo "[setup] done: $build_dir/crucible"
