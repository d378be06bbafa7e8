#!/bin/sh
# Builds and runs bench/sim_md_bench.cc: crucible sim md against LAMMPS's
# in.lj (32,000 atoms, 100 steps), one core each, best of 3. docs/sim/md.md.
# Usage: bench/sim_md_bench.sh [BUILD_DIR]   (default: build)
set -e
cd "$(dirname "$0")/.."
BUILD=${1:-build}
command -v lmp >/dev/null || { echo "lmp (Debian's lammps) not found: the peer is missing" >&2; exit 1; }
cmake --build "$BUILD" -j2 --target sim_md_bench >/dev/null
echo "machine: $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg) (shared; figures are the best of 3)"
OMP_NUM_THREADS=1 "$BUILD"/sim_md_bench --cells 20 --steps 100 --reps 3
