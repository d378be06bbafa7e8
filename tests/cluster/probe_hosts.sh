#!/usr/bin/env bash
# The probe across two namespace hosts (tests/cluster/netns_cluster.sh) with
# two ranks each and every host's link shaped to 1000 Mbit/s (tc tbf): the
# first rank of each host measures its own local sections (probe.json's
# "hosts"), the interconnect's pairs are split into intra- and inter-host
# links, the inter-host bandwidth is within 20% of the rate set (and far
# below the intra-host one), `probe --compare` shows every host, and the
# planner's cluster file takes its inter-node link from it.
# Started by ctest with the crucible binary's path; exit 77 (skip) where the
# cluster harness cannot run.
#   tests/cluster/probe_hosts.sh BUILD/crucible
set -euo pipefail
bin="$(realpath "$1")"
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
work=$(mktemp -d /tmp/crucible_probe_hosts.XXXXXX)
trap 'rm -rf "$work"' EXIT
rate=1000
cat > "$work/run.sh" <<RUN
export OMPI_MCA_plm_rsh_agent=\$CLUSTER_AGENT OMPI_MCA_btl_tcp_if_include=\$CLUSTER_SUBNET
export OMPI_MCA_oob_tcp_if_include=\$CLUSTER_SUBNET
cd "$work" && "$bin" launch --hostfile \$CLUSTER_HOSTFILE -n 4 --threads 1 -- probe --quick --json "$work/probe.json"
RUN
set +e
"$here/netns_cluster.sh" -n 2 --slots 2 --rate "$rate" -- bash "$work/run.sh" > "$work/probe.log" 2>&1
rc=$?
set -e
if [[ $rc -eq 77 ]]; then cat "$work/probe.log"; exit 77; fi
if [[ $rc -ne 0 ]]; then cat "$work/probe.log"; echo "[probe hosts] the probe failed ($rc)"; exit 1; fi
grep -q "inter_host    4 pair(s)" "$work/probe.log" || { cat "$work/probe.log"; echo "[probe hosts] no inter-host line"; exit 1; }
python3 - "$work/probe.json" "$rate" <<'PY'
import json, sys
p = json.load(open(sys.argv[1])); rate_gbs = float(sys.argv[2]) / 8 / 1000
def fail(m): print("[probe hosts] " + m); sys.exit(1)
hosts = p.get("hosts", [])
if [h["host"] for h in hosts] != ["host1", "host2"] or [h["ranks"] for h in hosts] != [[0, 1], [2, 3]]:
    fail(f"hosts: {[(h.get('host'), h.get('ranks')) for h in hosts]}")
for h in hosts:
    for k in ("compute", "memory", "topology", "storage"):
        if k not in h: fail(f"{h['host']} has no {k} section")
    if not any(g["valid"] and g["gflops"] > 0 for g in h["compute"]["gemm"]): fail(f"{h['host']}: no GEMM measured")
links = p["interconnect"]["links"]
intra, inter = links["intra_host"], links["inter_host"]
if intra["pairs"] != 2 or inter["pairs"] != 4: fail(f"pairs: {intra['pairs']} intra, {inter['pairs']} inter")
if abs(inter["bandwidth_gbs"] / rate_gbs - 1) > 0.2:
    fail(f"inter-host bandwidth {inter['bandwidth_gbs']:.4f} GB/s is not within 20% of the {rate_gbs} GB/s set")
if not intra["bandwidth_gbs"] > 3 * inter["bandwidth_gbs"]: fail(f"intra {intra['bandwidth_gbs']} vs inter {inter['bandwidth_gbs']}")
print(f"[probe hosts] inter-host {inter['bandwidth_gbs']:.4f} GB/s for a {rate_gbs} GB/s link, intra-host {intra['bandwidth_gbs']:.2f} GB/s")
PY
"$bin" probe --compare "$work/probe.json" "$work/probe.json" > "$work/compare.txt"
for row in "link inter_host bandwidth" "host 1 FMA peak"; do
  grep -q "$row" "$work/compare.txt" || { cat "$work/compare.txt"; echo "[probe hosts] --compare lacks '$row'"; exit 1; }
done
(cd "$work" && "$bin" plan --cluster-from-probe probe.json -o cluster.toml > /dev/null)
python3 - "$work/cluster.toml" "$rate" <<'PY'
import sys, tomllib
c = tomllib.load(open(sys.argv[1], "rb")); rate_gbs = float(sys.argv[2]) / 8 / 1000
inter = c["links"]["inter"]
if c["nodes"] != 2 or abs(inter["bandwidth_gbs"] / rate_gbs - 1) > 0.2: print(f"[probe hosts] cluster file: {c['nodes']} nodes, {inter}"); sys.exit(1)
PY
echo "[probe hosts] per-host sections, intra/inter links, --compare and the cluster file"
