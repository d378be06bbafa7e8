#!/usr/bin/python3
"""The GPU peers of crucible's GPU step, measured on the device machine in the
same call as crucible (scripts/gpu_check.sh bench): PyTorch 2 eager and
torch.compile training GPT-2 in bf16, and the GPU's bf16 GEMM ceiling that MFU
is quoted against.

    python3 bench/gpu_peers.py [--model gpt2-124M|gpt2-350M|tiny] [--batch 16]
        [--seq 1024] [--steps 20] [--modes eager,compile] [--device cuda] [--json]

Training step, as a PyTorch expert writes it (bench/gpt2_torch2.py's model:
tests/parity/gpt2_torch.py's GPT with F.scaled_dot_product_attention): random
tokens, forward + loss under torch.autocast(bfloat16), backward, fused AdamW
(lr 3e-4, weight decay 0.1 on the 2-D weights), zero_grad(set_to_none=True);
TF32 allowed for the fp32 remainder (what users set). Warm-up steps (3; the
first compiles), then --steps timed steps, each ended by a synchronize; the
median is reported, with tokens/s, peak memory (torch.cuda.max_memory_allocated)
and MFU = (6N + 12 L C T) tokens/s / the measured ceiling.

Ceiling: the best of torch.matmul bf16 8192^3 timed over 20 repetitions, after
warm-up (cuBLAS, what a GEMM-bound step can reach on this GPU).

--device cpu runs the same code on the CPU (a smoke test where there is no GPU;
no figures to quote). Exit 0 iff every configuration ran.
"""

import argparse
import json
import os
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "tests", "parity"))

import torch  # noqa: E402

from gpt2_torch2 import TrainingLoss, adamw, first_line, gpt2_sdpa  # noqa: E402

MODELS = {  # n_layer, n_head, n_embd, vocab
    "tiny": (4, 4, 256, 8192),
    "gpt2-124M": (12, 12, 768, 50257),
    "gpt2-350M": (24, 16, 1024, 50257),
}


def sync(device):
    if device == "cuda":
        torch.cuda.synchronize()


def gemm_ceiling(device):
    """TFLOP/s of the best bf16 8192^3 matmul (cuda), or None on the CPU."""
    if device != "cuda":
        return None
    n = 8192
    a = torch.randn(n, n, device=device, dtype=torch.bfloat16)
    b = torch.randn(n, n, device=device, dtype=torch.bfloat16)
    for _ in range(3):
        a @ b
    sync(device)
    best = float("inf")
    for _ in range(20):
        t0 = time.perf_counter()
        a @ b
        sync(device)
        best = min(best, time.perf_counter() - t0)
    return 2 * n**3 / best / 1e12


def run(model_name, batch, seq, steps, mode, device):
    L, H, C, V = MODELS[model_name]
    torch.manual_seed(1)
    model = gpt2_sdpa(L, H, C, V, seq).to(device)
    n_params = sum(p.numel() for p in model.parameters())
    n_pos = model.transformer.wpe.weight.numel()
    loss_fn = TrainingLoss(model)
    if mode == "compile":
        loss_fn = torch.compile(loss_fn)
    opt, kind, note = adamw(model, 3e-4, 0.1)
    idx = torch.randint(0, V, (batch, seq), device=device)
    tgt = torch.randint(0, V, (batch, seq), device=device)
    if device == "cuda":
        torch.cuda.reset_peak_memory_stats()

    def step():
        with torch.autocast(device_type=device, dtype=torch.bfloat16):
            loss = loss_fn(idx, tgt)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        return loss

    t0 = time.perf_counter()
    step()
    sync(device)
    first_s = time.perf_counter() - t0
    for _ in range(2):
        step()
    sync(device)
    times = []
    for _ in range(steps):
        t0 = time.perf_counter()
        loss = step()
        sync(device)
        times.append(time.perf_counter() - t0)
    ms = statistics.median(times) * 1e3
    tokens = batch * seq
    flops_per_token = 6 * (n_params - n_pos) + 12 * L * C * seq
    return {
        "model": model_name, "mode": mode, "batch": batch, "seq": seq, "device": device,
        "step_ms": ms, "tokens_per_s": tokens / ms * 1e3, "first_step_s": first_s,
        "flops_per_token": flops_per_token, "loss": float(loss.detach()),
        "peak_memory_bytes": torch.cuda.max_memory_allocated() if device == "cuda" else None,
        "adamw": kind, "note": note,
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="gpt2-124M", choices=sorted(MODELS))
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--seq", type=int, default=1024)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--modes", default="eager,compile")
    ap.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    if a.device == "cuda" and not torch.cuda.is_available():
        print("[gpu peers] no CUDA GPU visible to PyTorch", file=sys.stderr)
        return 2
    if a.device == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = True
        torch.backends.cudnn.allow_tf32 = True
    out = {"torch": torch.__version__, "gpu": torch.cuda.get_device_name(0) if a.device == "cuda" else None,
           "ceiling_tflops_bf16": gemm_ceiling(a.device), "runs": []}
    ok = True
    for mode in a.modes.split(","):
        try:
            r = run(a.model, a.batch, a.seq, a.steps, mode, a.device)
            if out["ceiling_tflops_bf16"]:
                r["mfu"] = r["flops_per_token"] * r["tokens_per_s"] / (out["ceiling_tflops_bf16"] * 1e12)
        except Exception as e:  # one configuration failing leaves the others' figures
            r = {"model": a.model, "mode": mode, "batch": a.batch, "failed": first_line(e)}
            ok = False
        out["runs"].append(r)
        if a.device == "cuda":
            torch.cuda.empty_cache()
    if a.json:
        print(json.dumps(out, indent=1))
    else:
        print(f"torch {out['torch']} on {out['gpu'] or 'cpu'}; bf16 GEMM ceiling "
              f"{out['ceiling_tflops_bf16'] or 0:.0f} TFLOP/s")
        for r in out["runs"]:
            if "failed" in r:
                print(f"  {r['model']} {r['mode']} batch {r['batch']}: FAILED {r['failed']}")
                continue
            mem = f", peak {r['peak_memory_bytes'] / 2**30:.1f} GiB" if r["peak_memory_bytes"] else ""
            mfu = f", MFU {r['mfu']:.2f}" if r.get("mfu") else ""
            print(f"  {r['model']} {r['mode']} batch {r['batch']} x {r['seq']}: {r['step_ms']:.1f} ms/step, "
                  f"{r['tokens_per_s'] / 1e3:.0f}k tok/s{mfu}{mem} (first step {r['first_step_s']:.1f} s)")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
