#!/usr/bin/env python3
"""Data-parallel scaling on one machine: the same global batch trained by
1 rank x T threads and by N ranks x T/N threads (crucible launch), with the
bucket reductions overlapped with backward and not.

Reports, from each run's metrics.jsonl (median over the measured steps):
  efficiency = step time (1 rank) / step time (N ranks)   [same work, same cores]
  hidden     = 1 - exposed comm (overlap) / exposed comm (no overlap)

  bench/dp_scaling.py --workload gpt2-124M --ranks 2 --steps 6
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
WORKLOADS = {  # model overrides; the global batch is `batch` sequences
    "tiny": (["model.n_layer=4", "model.n_head=4", "model.n_embd=256", "model.vocab_size=8192",
              "model.seq_len=256"], 8),
    "gpt2-124M": (["model.n_layer=12", "model.n_head=12", "model.n_embd=768",
                   "model.vocab_size=50304", "model.seq_len=64", "data.vocab_size=8192"], 4),
}


def run(binary, workdir, name, ranks, threads, batch, steps, extra):
    run_dir = os.path.join(workdir, name)
    train = ["train", "--run-dir", run_dir, "--set", f"train.steps={steps}",
             "--set", f"train.batch_size={batch // ranks}", "--set", "train.grad_accum=1",
             "--set", "train.eval_every=0", "--set", "train.eval_batches=1",
             "--set", "ckpt.every=0", "--set", "run.sample_tokens=0",
             "--set", f"train.threads={threads}"]
    for o in extra:
        train += ["--set", o]
    cmd = [binary] + (["launch", "-n", str(ranks), "--threads", str(threads), "--"] if ranks > 1 else []) + train
    out = subprocess.run(cmd, cwd=workdir, capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit(f"{name} failed ({out.returncode}):\n{out.stdout}\n{out.stderr}")
    rows = [json.loads(l) for l in open(os.path.join(run_dir, "metrics.jsonl"))]
    rows = rows[2:] if len(rows) > 3 else rows  # first steps: page faults, primitive creation
    med = lambda k: statistics.median(r.get(k, 0.0) for r in rows)
    return {k: med(k) for k in ("step_ms", "forward_ms", "backward_ms", "optimizer_ms", "comm_ms",
                                "tokens_per_s")}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--workload", default="gpt2-124M", choices=WORKLOADS)
    ap.add_argument("--ranks", type=int, default=2)
    ap.add_argument("--cores", type=int, default=os.cpu_count())
    ap.add_argument("--steps", type=int, default=6)
    ap.add_argument("--zero", type=int, default=0)
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                    help="extra config override for the multi-rank runs (e.g. dist.reproducible=true)")
    ap.add_argument("--binary", default=os.path.join(ROOT, "build", "crucible"))
    ap.add_argument("--workdir", default=None, help="keeps the runs and the dataset cache")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    model, batch = WORKLOADS[a.workload]
    workdir = a.workdir or tempfile.mkdtemp(prefix="crucible_dp_")
    per_rank = max(1, a.cores // a.ranks)
    single = run(a.binary, workdir, "single", 1, a.cores, batch, a.steps, model)
    dist_on = run(a.binary, workdir, "overlap", a.ranks, per_rank, batch, a.steps,
                  model + [f"dist.zero={a.zero}", "dist.overlap=true"] + a.set)
    dist_off = run(a.binary, workdir, "no_overlap", a.ranks, per_rank, batch, a.steps,
                   model + [f"dist.zero={a.zero}", "dist.overlap=false"] + a.set)
    result = {
        "workload": a.workload, "ranks": a.ranks, "cores": a.cores, "zero": a.zero,
        "single": single, "overlap": dist_on, "no_overlap": dist_off,
        "efficiency": single["step_ms"] / dist_on["step_ms"],
        "hidden": (1 - dist_on["comm_ms"] / dist_off["comm_ms"]) if dist_off["comm_ms"] > 0 else None,
    }
    if a.json:
        print(json.dumps(result))
        return
    print(f"{a.workload}, global batch {batch} x seq, {a.cores} cores")
    for name in ("single", "overlap", "no_overlap"):
        r = result[name]
        print(f"  {name:10s} step {r['step_ms']:8.1f} ms  fwd {r['forward_ms']:7.1f}  bwd {r['backward_ms']:7.1f}"
              f"  opt {r['optimizer_ms']:6.1f}  exposed comm {r['comm_ms']:7.1f}  {r['tokens_per_s']:8.0f} tok/s")
    print(f"  scaling efficiency ({a.ranks} ranks x {per_rank} threads vs 1 x {a.cores}): {result['efficiency']:.3f}")
    if result["hidden"] is not None:
        print(f"  communication hidden by overlap: {100 * result['hidden']:.1f}%")


if __name__ == "__main__":
    main()
