#!/usr/bin/env python3
"""Data parallelism over two hosts with a shaped link (issue 18's benchmark):
2 namespace hosts (tests/cluster/netns_cluster.sh) x 1 rank x 1 thread,
Open MPI over TCP, the link shaped with tc tbf to each rate, the same global
batch, overlap on and off. Against crucible plan's prediction for the same
link: each run writes RUN/plan.json from ./cluster.toml, a cluster file made
from a 2-host probe of this machine whose inter-node link is set to the rate.

Reports per workload and rate (median over the steps after the second):
  step        measured step time, and the planner's
  exposed     communication the step waited for (metrics comm_ms), and the
              planner's exposed DP time (breakdown.dp_comm)
  hidden      1 - exposed (overlap on) / exposed (overlap off)
  link        the wire rate: bytes of one allreduce ring / exposed (off)

  sudo bench/multihost_dp.py [--rates 1000,10000,25000] [--steps 8]
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CLUSTER = os.path.join(ROOT, "tests", "cluster", "netns_cluster.sh")
WORKLOADS = {"tiny": os.path.join(ROOT, "configs", "tiny.toml"),
             "gpt2-124M": os.path.join(ROOT, "configs", "gpt2-124M.toml")}
MCA = ("export OMPI_MCA_plm_rsh_agent=$CLUSTER_AGENT OMPI_MCA_btl_tcp_if_include=$CLUSTER_SUBNET "
       "OMPI_MCA_oob_tcp_if_include=$CLUSTER_SUBNET; ")


def in_cluster(command, rate=None, slots=1):
    args = [CLUSTER, "-n", "2", "--slots", str(slots)] + (["--rate", str(rate)] if rate else []) + ["--", "bash", "-c", MCA + command]
    r = subprocess.run(args, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"[multihost] failed ({r.returncode}): {command}\n{r.stdout[-3000:]}{r.stderr[-3000:]}")
    return r.stdout + r.stderr


def median_of(run_dir, key):
    rows = [json.loads(l) for l in open(os.path.join(run_dir, "metrics.jsonl"))]
    vals = [r[key] for r in rows if r.get("step", 0) > 2 and key in r]
    return statistics.median(vals)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--binary", default=os.path.join(ROOT, "build", "crucible"))
    ap.add_argument("--rates", default="1000,10000,25000", help="Mbit/s")
    ap.add_argument("--steps", type=int, default=8)
    ap.add_argument("--workloads", default="tiny,gpt2-124M")
    ap.add_argument("--workdir", default="")
    a = ap.parse_args()
    work = a.workdir or tempfile.mkdtemp(prefix="crucible_multihost_")
    os.makedirs(work, exist_ok=True)
    binary = os.path.abspath(a.binary)
    # The machine as two hosts, unshaped: compute, and the link's latency.
    in_cluster(f"cd {work} && {binary} launch --hostfile $CLUSTER_HOSTFILE -n 2 --threads 1 -- probe --quick --json {work}/probe.json")
    subprocess.run([binary, "plan", "--cluster-from-probe", f"{work}/probe.json", "-o", f"{work}/base.toml"],
                   check=True, capture_output=True)
    base = open(f"{work}/base.toml").read()
    base = re.sub(r"(?m)^devices_per_node = \d+", "devices_per_node = 1", base)
    results = []
    for name in a.workloads.split(","):
        for rate in [int(x) for x in a.rates.split(",")]:
            toml = re.sub(r"(\[links\.inter\][^\[]*?bandwidth_gbs = )[0-9.e+-]+", lambda m: m.group(1) + repr(rate / 8000), base, flags=re.S)
            row = {"workload": name, "rate_mbit": rate}
            for overlap in (True, False):
                d = f"{work}/{name}-{rate}-{'on' if overlap else 'off'}"
                os.makedirs(d, exist_ok=True)
                open(f"{d}/cluster.toml", "w").write(toml)
                in_cluster(f"cd {work} && {binary} launch --hostfile $CLUSTER_HOSTFILE -n 2 --threads 1 -- train {WORKLOADS[name]} "
                           f"--set train.steps={a.steps} --set train.eval_every=0 --set run.sample_tokens=0 "
                           f"--set ckpt.every=0 --set dist.overlap={'true' if overlap else 'false'} --run-dir {d}", rate)
                plan = json.load(open(f"{d}/plan.json"))
                key = "on" if overlap else "off"
                row[f"step_ms_{key}"] = median_of(d, "step_ms")
                row[f"comm_ms_{key}"] = median_of(d, "comm_ms")
                row[f"plan_step_ms_{key}"] = plan.get("step_time_s", float("nan")) * 1000
                row[f"plan_dp_ms_{key}"] = plan.get("breakdown", {}).get("dp_comm", float("nan")) * 1000
            row["hidden"] = 1 - row["comm_ms_on"] / row["comm_ms_off"] if row["comm_ms_off"] > 0 else None
            results.append(row)
            print(f"{name:10s} {rate:6d} Mbit/s  step {row['step_ms_on']:8.1f} ms (plan {row['plan_step_ms_on']:8.1f})"
                  f"  exposed {row['comm_ms_on']:8.1f} ms (plan {row['plan_dp_ms_on']:8.1f})"
                  f"  no overlap: step {row['step_ms_off']:8.1f} exposed {row['comm_ms_off']:8.1f}"
                  f"  hidden {100 * (row['hidden'] or 0):5.1f}%", flush=True)
    json.dump(results, open(f"{work}/multihost_dp.json", "w"), indent=1)
    print(f"[multihost] {work}/multihost_dp.json")


if __name__ == "__main__":
    main()
