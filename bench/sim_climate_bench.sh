#!/bin/sh
# The climate workload's figures (docs/sim/climate.md): the step's achieved
# memory bandwidth against STREAM triad, then strong scaling over 1, 2 and 4
# MPI ranks (one OpenMP thread each) with the Amdahl / Karp-Flatt analysis.
# Usage: bench/sim_climate_bench.sh [BUILD_DIR]   (default: build)
set -eu
build=${1:-build}
bench="$build/sim_climate_bench"
"$bench"
echo
echo "== Williamson case 2: error norms and convergence"
"$bench" --convergence
echo
echo "== the default configuration, whole (threads: OMP_NUM_THREADS or all)"
"$bench" --default-run
echo
echo "== strong scaling: case 6, 360 x 720 cells, polar filter on, 1 OpenMP thread per rank"
points=""
for n in 1 2 4; do
  line=$(OMP_NUM_THREADS=1 mpirun --oversubscribe --bind-to none --allow-run-as-root --mca btl self,vader \
    -n "$n" "$bench" --scaling-point --nlat 360 --steps 10 | grep '^scaling_point')
  echo "$line"
  points="$points $n:$(echo "$line" | awk '{print $3}')"
done
# shellcheck disable=SC2086
"$bench" --scaling-analyse $points
