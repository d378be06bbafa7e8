#!/usr/bin/env python3
"""The planner against this machine: predicted vs measured step time and peak
memory for a set of layouts (docs/plan.md, docs/performance.md).

  python3 bench/plan_accuracy.py [--work DIR] [--steps N] [--crucible build/crucible]

In DIR (default /tmp/plan_accuracy): probes the machine (quick; the
interconnect under `crucible launch -n 2`), writes its
cluster.toml (`crucible plan --cluster-from-probe`), trains each layout for a
few steps (each run stores its prediction in RUN/plan.json before its first
step), then refits the cluster file (`crucible plan --calibrate`) twice: from
the 1-rank runs only (the others are held out), and from all runs. Prints,
per layout: measured step time (median of steps 3..N), the prediction before
calibration, after the held-out fit and after the full fit, with errors; and
predicted vs measured peak memory. Runs one benchmark at a time: nothing
else should use the machine meanwhile.
"""
import argparse, json, os, statistics, subprocess, sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

LAYOUTS = [  # name, config, ranks, --set overrides
    ("tiny fp32", "tiny", 1, []),
    ("tiny bf16", "tiny", 1, ["train.precision=bf16"]),
    ("tiny bf16 selective", "tiny", 1, ["train.precision=bf16", "train.recompute=selective"]),
    ("tiny bf16 full", "tiny", 1, ["train.precision=bf16", "train.recompute=full"]),
    ("tiny fp32 mb4 m2", "tiny", 1, ["train.batch_size=4", "train.grad_accum=2"]),
    ("gpt2 bf16", "gpt2-124M", 1, ["train.precision=bf16", "train.grad_accum=2"]),
    ("gpt2 fp32", "gpt2-124M", 1, ["train.grad_accum=2"]),
    ("tiny dp2", "tiny", 2, ["train.batch_size=4"]),
    ("tiny dp2 zero1 bf16", "tiny", 2, ["train.batch_size=4", "dist.zero=1", "train.precision=bf16"]),
    ("tiny tp2 bf16", "tiny", 2, ["dist.tp=2", "train.precision=bf16"]),
    ("tiny pp2 m4", "tiny", 2, ["dist.pp=2", "train.batch_size=2", "train.grad_accum=4"]),
]


def run(cmd, cwd):
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    p = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit(f"[plan_accuracy] failed ({p.returncode}): {' '.join(cmd)}\n{p.stdout}{p.stderr}")
    return p.stdout


def measured(run_dir, ranks):
    files = ["metrics.jsonl"] if ranks == 1 else [f"metrics.rank{r}.jsonl" for r in range(ranks)]
    steps, peak = [], 0
    for f in files:
        for line in open(os.path.join(run_dir, f)):
            row = json.loads(line)
            peak = max(peak, row.get("mem_peak", 0))
    for line in open(os.path.join(run_dir, "metrics.jsonl")):
        row = json.loads(line)
        if row["step"] > 2:
            steps.append(row["step_ms"])
    return statistics.median(steps), peak


def predict(crucible, work, run_dir, cluster, ranks):
    plan = json.load(open(os.path.join(run_dir, "plan.json")))
    out = run([crucible, "plan", os.path.join(run_dir, "config.toml"), "--cluster", cluster, "--devices",
               str(ranks), "--layout", plan["layout_text"], "--json"], work)
    return json.loads(out)["step_time_s"] * 1e3


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--work", default="/tmp/plan_accuracy")
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--crucible", default=os.path.join(ROOT, "build", "crucible"))
    a = ap.parse_args()
    crucible = os.path.abspath(a.crucible)
    os.makedirs(a.work, exist_ok=True)
    print("[plan_accuracy] probe ...", file=sys.stderr)
    run([crucible, "probe", "--quick", "--sections", "compute,memory,topology", "--json", "probe.json"], a.work)
    # The link between two ranks of this machine: the interconnect section
    # measured under launch, merged into the local probe (whose compute rows
    # are of all threads of one process).
    run([crucible, "launch", "-n", "2", "--", "probe", "--quick", "--sections", "interconnect", "--json",
         "probe_ic.json"], a.work)
    doc = json.load(open(os.path.join(a.work, "probe.json")))
    doc["interconnect"] = json.load(open(os.path.join(a.work, "probe_ic.json")))["interconnect"]
    json.dump(doc, open(os.path.join(a.work, "probe.json"), "w"), indent=1)
    run([crucible, "plan", "--cluster-from-probe", "probe.json", "-o", "cluster.toml"], a.work)
    rows = []
    for name, cfg, ranks, sets in LAYOUTS:
        print(f"[plan_accuracy] {name} ...", file=sys.stderr)
        rd = os.path.join(a.work, "runs", name.replace(" ", "_"))
        subprocess.run(["rm", "-rf", rd])
        cmd = [crucible]
        if ranks > 1:
            cmd += ["launch", "-n", str(ranks), "--threads", "1", "--"]
        cmd += ["train", os.path.join(ROOT, "configs", cfg + ".toml"), "--run-dir", rd]
        for s in sets + [f"train.steps={a.steps}", "train.eval_every=0", "train.eval_batches=1", "ckpt.every=0",
                         "run.sample_tokens=0"]:
            cmd += ["--set", s]
        run(cmd, a.work)
        step, peak = measured(rd, ranks)
        plan = json.load(open(os.path.join(rd, "plan.json")))
        rows.append(dict(name=name, dir=rd, ranks=ranks, step=step, peak=peak, before=plan["step_time_s"] * 1e3,
                         peak_pred=plan["peak_memory_bytes"]))
    one_rank = [r["dir"] for r in rows if r["ranks"] == 1]
    run([crucible, "plan", "--cluster", "cluster.toml", "--calibrate", *one_rank, "-o", "held_out.toml"], a.work)
    run([crucible, "plan", "--cluster", "cluster.toml", "--calibrate", *[r["dir"] for r in rows], "-o", "all.toml"],
        a.work)
    for r in rows:
        r["held"] = predict(crucible, a.work, r["dir"], "held_out.toml", r["ranks"])
        r["all"] = predict(crucible, a.work, r["dir"], "all.toml", r["ranks"])
    err = lambda p, m: 100 * (p / m - 1)
    print(f"{'layout':22} {'ranks':>5} {'measured':>9} {'before':>16} {'1-rank fit':>16} {'all fit':>16} "
          f"{'peak MiB pred/meas':>22}")
    for r in rows:
        held = "(held out)" if r["ranks"] > 1 else ""
        print(f"{r['name']:22} {r['ranks']:5d} {r['step']:7.1f}ms {r['before']:7.1f} ({err(r['before'], r['step']):+5.1f}%) "
              f"{r['held']:7.1f} ({err(r['held'], r['step']):+5.1f}%) {r['all']:7.1f} ({err(r['all'], r['step']):+5.1f}%) "
              f"{r['peak_pred'] / 2**20:9.1f}/{r['peak'] / 2**20:7.1f} ({err(r['peak_pred'], r['peak']):+.1f}%) {held}")
    for key, label in (("before", "before calibration"), ("held", "after the 1-rank fit"), ("all", "after the full fit")):
        e = [abs(err(r[key], r["step"])) for r in rows]
        print(f"median |error| {label}: {statistics.median(e):.1f}%, max {max(e):.1f}%")


if __name__ == "__main__":
    main()
