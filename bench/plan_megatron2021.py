#!/usr/bin/env python3
"""A check of the planner at scale against one public table, not a fit.

Narayanan et al., "Efficient Large-Scale Language Model Training on GPU
Clusters Using Megatron-LM" (SC'21), Table 1: GPT models of 1.7B to 1T
parameters on 32 to 3072 A100-80GB (DGX A100 nodes, 8x HDR InfiniBand),
sequence 2048, vocabulary 51200, full activation recomputation, with their
tp, pp, GPU counts, global batch and achieved teraFLOP/s per GPU. Their FLOP
count includes the recomputed forward: 96 B s l h^2 (1 + s/6h + V/16lh) per
iteration, so the published iteration time is that / (TFLOP/s x GPUs).

  python3 bench/plan_megatron2021.py [--crucible build/crucible] [--cluster configs/clusters/dgx-a100.toml]

For each row: `crucible plan --layout "tp=..,pp=..,mb=1,precision=bf16,
recompute=full"` on the shipped DGX A100 file (written from specifications
before this check was run), against the published time. The micro-batch size
(1) and the 1F1B schedule are assumptions where the table gives none.
"""
import argparse, json, os, statistics, subprocess, tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# name, layers, heads, hidden, GPUs, tp, pp, global batch, TFLOP/s per GPU (Table 1)
ROWS = [("1.7B", 24, 24, 2304, 32, 1, 1, 512, 137), ("3.6B", 30, 32, 3072, 64, 2, 1, 512, 138),
        ("7.5B", 36, 32, 4096, 128, 4, 1, 512, 142), ("18B", 40, 48, 6144, 256, 8, 1, 1024, 135),
        ("39B", 48, 64, 8192, 512, 8, 2, 1536, 138), ("76B", 60, 80, 10240, 1024, 8, 4, 1792, 140),
        ("146B", 80, 96, 12288, 1536, 8, 8, 2304, 148), ("310B", 96, 128, 16384, 1920, 8, 16, 2160, 155),
        ("530B", 105, 128, 20480, 2520, 8, 35, 2520, 163), ("1T", 128, 160, 25600, 3072, 8, 64, 3072, 163)]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--crucible", default=os.path.join(ROOT, "build", "crucible"))
    ap.add_argument("--cluster", default=os.path.join(ROOT, "configs", "clusters", "dgx-a100.toml"))
    a = ap.parse_args()
    errors = []
    print(f"{'model':6} {'layout':28} {'published s':>11} {'predicted s':>11} {'error':>7}  {'fits crucible':>13}")
    with tempfile.TemporaryDirectory() as tmp:
        for name, l, heads, h, gpus, tp, pp, batch, tflops in ROWS:
            cfg = os.path.join(tmp, "m.toml")
            open(cfg, "w").write(f"[model]\nn_layer = {l}\nn_head = {heads}\nn_embd = {h}\nvocab_size = 51200\n"
                                 f"seq_len = 2048\n[train]\nbatch_size = 1\n[run]\nname = \"{name}\"\n")
            out = subprocess.run([a.crucible, "plan", cfg, "--cluster", a.cluster, "--devices", str(gpus),
                                  "--global-batch", str(batch), "--json", "--layout",
                                  f"tp={tp},pp={pp},mb=1,precision=bf16,recompute=full"],
                                 capture_output=True, text=True, check=True).stdout
            p = json.loads(out)
            s, V = 2048, 51200
            flops = 96 * batch * s * l * h * h * (1 + s / (6 * h) + V / (16 * l * h))
            published = flops / (tflops * 1e12 * gpus)
            err = 100 * (p["step_time_s"] / published - 1)
            errors.append(abs(err))
            print(f"{name:6} {'tp=%d pp=%d dp=%d' % (tp, pp, gpus // (tp * pp)):28} {published:11.2f} "
                  f"{p['step_time_s']:11.2f} {err:+6.1f}%  {str(p['fits']):>13}")
    print(f"median |error| {statistics.median(errors):.1f}%, max {max(errors):.1f}%")


if __name__ == "__main__":
    main()
