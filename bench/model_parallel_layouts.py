#!/usr/bin/env python3
"""Layouts of one global batch on 2 ranks x 1 thread: data parallel (dp=2) against a
two-stage pipeline (pp=2) with each schedule and against tensor parallelism (tp=2),
for several micro-batch counts m.

Reports per layout, from each rank's metrics.rank{R}.jsonl (median over the steps after
the first): step time, the pipeline's measured bubble (time blocked in receives over
forward+backward time, worst rank) next to the schedule's theory, exposed communication
(data-parallel reductions; tensor-parallel collectives, all exposed), and the peak
allocator memory per rank (weights, gradients, optimizer state and activations: what
model parallelism divides).

  bench/model_parallel_layouts.py --workload gpt2-124M --micro 4 8 16 --steps 4
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
WORKLOADS = {  # model overrides, and sequences per micro-batch
    "tiny": (["model.n_layer=4", "model.n_head=4", "model.n_embd=256", "model.vocab_size=8192",
              "model.seq_len=256"], 1),
    "gpt2-124M": (["model.n_layer=12", "model.n_head=12", "model.n_embd=768",
                   "model.vocab_size=50304", "model.seq_len=64", "data.vocab_size=8192"], 1),
}
THEORY = {"1f1b": lambda p, v, m: (p - 1) / m, "interleaved": lambda p, v, m: (p - 1) / (v * m),
          "zb-h1": lambda p, v, m: (p - 1) / (3 * m)}


def run(binary, workdir, name, micro_batch, accum, steps, sets):
    run_dir = os.path.join(workdir, name)
    train = ["train", "--run-dir", run_dir, "--set", f"train.steps={steps}",
             "--set", f"train.batch_size={micro_batch}", "--set", f"train.grad_accum={accum}",
             "--set", "train.eval_every=0", "--set", "train.eval_batches=1",
             "--set", "ckpt.every=0", "--set", "run.sample_tokens=0", "--set", "train.threads=1"]
    for s in sets:
        train += ["--set", s]
    cmd = [binary, "launch", "-n", "2", "--threads", "1", "--"] + train
    out = subprocess.run(cmd, cwd=workdir, capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit(f"{name} failed:\n{out.stdout}\n{out.stderr}")
    ranks = []
    for r in range(2):
        with open(os.path.join(run_dir, f"metrics.rank{r}.jsonl")) as f:
            ranks.append([json.loads(line) for line in f][1:])  # the first step warms up
    med = lambda rows, k: statistics.median(row.get(k, 0.0) for row in rows)
    step = max(med(rows, "step_ms") for rows in ranks)
    bubble = max(med(rows, "pipeline_wait_ms") / max(1e-9, med(rows, "forward_ms") + med(rows, "backward_ms"))
                 for rows in ranks)
    return {"step_ms": step, "bubble": bubble,
            "comm_ms": max(med(rows, "comm_ms") + med(rows, "tp_comm_ms") for rows in ranks),
            "peak_mb": [max(row["mem_peak"] for row in rows) / 1e6 for rows in ranks]}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--workload", default="gpt2-124M", choices=WORKLOADS)
    ap.add_argument("--micro", type=int, nargs="+", default=[4, 8, 16], help="micro-batches per step")
    ap.add_argument("--seq-len", type=int, default=None, help="override the workload's seq_len")
    ap.add_argument("--layouts", default="all",
                    help="comma list of pp-1f1b, pp-zb-h1, pp-interleaved, pp-1f1b-cost, pp-zb-h1-cost, tp, tp-sp "
                         "(dp=2, the baseline, always runs)")
    ap.add_argument("--steps", type=int, default=4)
    ap.add_argument("--binary", default=os.path.join(ROOT, "build", "crucible"))
    ap.add_argument("--workdir", default=None, help="keeps the runs (default: a temporary directory)")
    args = ap.parse_args()
    model, micro_batch = WORKLOADS[args.workload]
    if args.seq_len:
        model = [s for s in model if not s.startswith("model.seq_len=")] + [f"model.seq_len={args.seq_len}"]
    workdir = args.workdir or tempfile.mkdtemp(prefix="crucible_pp_bench_")
    os.makedirs(workdir, exist_ok=True)
    print(f"{args.workload}, 2 ranks x 1 thread, {micro_batch} sequence(s) per micro-batch; runs in {workdir}")
    print(f"{'layout':<28} {'m':>3} {'step ms':>9} {'vs dp':>6} {'bubble':>7} {'theory':>7} {'comm ms':>8} "
          f"{'peak MB r0 / r1':>16}")
    for m in args.micro:
        dp = run(args.binary, workdir, f"dp2_m{m}", micro_batch, m // 2, args.steps, model)
        print(f"{'dp=2':<28} {m:>3} {dp['step_ms']:>9.0f} {1.0:>6.2f} {'':>7} {'':>7} {dp['comm_ms']:>8.0f} "
              f"{dp['peak_mb'][0]:>7.0f} / {dp['peak_mb'][1]:<7.0f}", flush=True)
        want = lambda key: args.layouts == "all" or key in args.layouts.split(",")
        for sched, v, split in (("1f1b", 1, "even"), ("zb-h1", 1, "even"), ("interleaved", 2, "even"),
                                ("1f1b", 1, "cost"), ("zb-h1", 1, "cost")):
            key = f"pp-{sched}" + ("-cost" if split == "cost" else "")
            if not want(key):
                continue
            sets = model + ["dist.pp=2", f"dist.pp_schedule={sched}", f"dist.pp_virtual={v}", f"dist.pp_split={split}"]
            r = run(args.binary, workdir, f"pp2_{sched}_{split}_m{m}", micro_batch, m, args.steps, sets)
            name = f"pp=2 {sched}" + (f" v={v}" if v > 1 else "") + (" cost split" if split == "cost" else "")
            print(f"{name:<28} {m:>3} {r['step_ms']:>9.0f} {dp['step_ms'] / r['step_ms']:>6.2f} "
                  f"{100 * r['bubble']:>6.1f}% {100 * THEORY[sched](2, v, m):>6.1f}% {r['comm_ms']:>8.0f} "
                  f"{r['peak_mb'][0]:>7.0f} / {r['peak_mb'][1]:<7.0f}", flush=True)
        for name, sp in (("tp=2", "false"), ("tp=2 sequence parallel", "true")):
            if not want("tp" if sp == "false" else "tp-sp"):
                continue
            r = run(args.binary, workdir, f"tp2_sp{sp}_m{m}", micro_batch, m, args.steps,
                    model + ["dist.tp=2", f"dist.sequence_parallel={sp}"])
            print(f"{name:<28} {m:>3} {r['step_ms']:>9.0f} {dp['step_ms'] / r['step_ms']:>6.2f} {'':>7} {'':>7} "
                  f"{r['comm_ms']:>8.0f} {r['peak_mb'][0]:>7.0f} / {r['peak_mb'][1]:<7.0f}", flush=True)


if __name__ == "__main__":
    main()
