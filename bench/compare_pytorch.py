#!/usr/bin/python3
"""Times one GPT-2 training step in PyTorch next to crucible's, in the same run.

    /usr/bin/python3 bench/compare_pytorch.py --workload tiny|gpt2-124M \
        [--threads N] [--steps K] [--crucible build/crucible] [--json]

Training step (both sides): zero grads, forward, mean cross-entropy, backward,
AdamW(lr 3e-4, wd 0.1 on the blocks' 2-D matmul weights) step; the same batch of
random tokens every step.  PyTorch uses the model of tests/parity/gpt2_torch.py
(one model definition), eager mode.

PyTorch measurements, each in its own subprocess (this script re-invoked with
the hidden --worker flag), run one after another:
  fp32 (best env)       OPENBLAS_CORETYPE / OPENBLAS_L2_SIZE unset, GLIBC_TUNABLES
                        raising malloc's mmap and trim thresholds (no page-fault
                        churn on the big activations), OMP_NUM_THREADS=N,
                        OPENBLAS_NUM_THREADS=N, OMP_WAIT_POLICY=PASSIVE; and when
                        torch's libblas.so.3 is the slow reference (netlib) BLAS but
                        an OpenBLAS is installed, that OpenBLAS via LD_LIBRARY_PATH.
  fp32 (as installed)   the environment untouched (reference only).
  bf16 autocast (best)  the best env without OMP_WAIT_POLICY, forward + loss under
                        torch.autocast('cpu', dtype=torch.bfloat16).
Every worker calls torch.set_num_threads(N).  Each does 3 warm-up steps and then K
timed steps and reports the median.

Then crucible: `<crucible> bench step --workload W --threads N --steps K --json`
(environment untouched).  If it is missing or fails, that is said, and PyTorch's
figures are still printed.  Exit code 0 iff every PyTorch measurement succeeded.

The ratio column is pytorch_ms / crucible_ms: > 1 means crucible is faster.
"""

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(REPO, "tests", "parity"))

WORKLOADS = {
    # name: n_layer, n_head, n_embd, vocab_size, seq_len, batch  (DESIGN.md)
    "tiny": dict(n_layer=4, n_head=4, n_embd=256, vocab_size=8192, seq_len=256, batch=8),
    "gpt2-124M": dict(n_layer=12, n_head=12, n_embd=768, vocab_size=50304, seq_len=64,
                      batch=4),
}
WARMUP = 3
LR = 3e-4
WEIGHT_DECAY = 0.1
GLIBC_TUNABLES = "glibc.malloc.mmap_threshold=268435456:glibc.malloc.trim_threshold=4294967296"
# Debian's alternative libblas.so.3 directories, best first.
OPENBLAS_DIRS = [
    "/usr/lib/x86_64-linux-gnu/openblas-pthread",
    "/usr/lib/x86_64-linux-gnu/openblas-openmp",
    "/usr/lib/aarch64-linux-gnu/openblas-pthread",
    "/usr/lib/aarch64-linux-gnu/openblas-openmp",
]
ENV_KEYS = ("OMP_NUM_THREADS", "OMP_WAIT_POLICY", "OPENBLAS_NUM_THREADS",
            "OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE", "GLIBC_TUNABLES", "LD_LIBRARY_PATH")


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def flop_per_step(w):
    """6*N + 12*L*C*T FLOPs per token (DESIGN.md), times tokens per step.
    N = all non-embedding parameters (blocks + ln_f) plus wte, which takes part in
    the tied LM-head matmul; wpe (a lookup only) is left out."""
    L, C, V, T, B = w["n_layer"], w["n_embd"], w["vocab_size"], w["seq_len"], w["batch"]
    per_layer = (C * 3 * C + 3 * C) + (C * C + C) + (C * 4 * C + 4 * C) + (4 * C * C + C) \
        + 4 * C
    n = L * per_layer + 2 * C + V * C
    return (6 * n + 12 * L * C * T) * B * T, n


# -------------------------------------------------------------------------- worker


def loaded_blas():
    """The BLAS library this process has mapped, and what kind it is."""
    paths = []
    try:
        with open("/proc/self/maps") as f:
            for line in f:
                parts = line.split()
                if len(parts) >= 6:
                    p = parts[-1]
                    base = os.path.basename(p)
                    if any(s in base for s in ("blas", "blis", "mkl_rt", "libmkl")) \
                            and p not in paths:
                        paths.append(p)
    except OSError:
        return {"path": None, "kind": "unknown"}
    if not paths:
        return {"path": None, "kind": "unknown"}
    path = os.path.realpath(paths[0])
    low = path.lower()
    if "openblas" in low:
        kind = "openblas"
    elif "blis" in low:
        kind = "blis"
    elif "mkl" in low:
        kind = "mkl"
    elif "/blas/libblas" in low or "libblas.so.3." in low:
        kind = "reference"
    else:
        kind = "unknown"
    return {"path": path, "kind": kind}


def run_worker(args):
    import torch
    from gpt2_torch import GPT, lm_loss, param_groups

    torch.set_num_threads(args.threads)
    w = WORKLOADS[args.workload]
    torch.manual_seed(0)
    model = GPT(w["n_layer"], w["n_head"], w["n_embd"], w["vocab_size"], w["seq_len"])
    model.init_weights(std=0.02, seed=0)
    model.train()
    opt = torch.optim.AdamW(param_groups(model, WEIGHT_DECAY), lr=LR)
    g = torch.Generator().manual_seed(1)
    tok = torch.randint(0, w["vocab_size"], (w["batch"], w["seq_len"] + 1), generator=g)
    x, y = tok[:, :-1].contiguous(), tok[:, 1:].contiguous()
    bf16 = args.worker == "bf16"

    def step():
        opt.zero_grad(set_to_none=False)
        if bf16:
            with torch.autocast("cpu", dtype=torch.bfloat16):
                loss = lm_loss(model(x), y)
        else:
            loss = lm_loss(model(x), y)
        loss.backward()
        opt.step()
        return loss.item()

    times, losses = [], []
    for i in range(WARMUP + args.steps):
        t0 = time.perf_counter()
        losses.append(step())
        dt = time.perf_counter() - t0
        if i >= WARMUP:
            times.append(dt)
    med = statistics.median(times)
    out = {
        "precision": args.worker,
        "ms_per_step": med * 1e3,
        "tokens_per_s": w["batch"] * w["seq_len"] / med,
        "threads": args.threads,
        "ms_min": min(times) * 1e3,
        "ms_mean": statistics.mean(times) * 1e3,
        "steps": args.steps,
        "warmup": WARMUP,
        "loss_first": losses[0],
        "loss_last": losses[-1],
        "torch": torch.__version__,
        "torch_threads": torch.get_num_threads(),
        "blas": loaded_blas(),
        "env": {k: os.environ[k] for k in ENV_KEYS if k in os.environ},
    }
    print(json.dumps(out), flush=True)
    return 0


# -------------------------------------------------------------------------- parent


def torch_blas_dir(explicit):
    """The OpenBLAS directory to put first on LD_LIBRARY_PATH for the best env, or
    None (torch's default libblas.so.3 is already fast, or none is installed)."""
    if explicit:
        return explicit
    default = os.path.realpath("/usr/lib/x86_64-linux-gnu/libblas.so.3") \
        if os.path.exists("/usr/lib/x86_64-linux-gnu/libblas.so.3") else ""
    if "openblas" in default or "blis" in default or "mkl" in default:
        return None
    for d in OPENBLAS_DIRS:
        if os.path.exists(os.path.join(d, "libblas.so.3")):
            return d
    return None


def best_env(threads, precision, blas_dir):
    env = dict(os.environ)
    env.pop("OPENBLAS_CORETYPE", None)
    env.pop("OPENBLAS_L2_SIZE", None)
    env["GLIBC_TUNABLES"] = GLIBC_TUNABLES
    env["OMP_NUM_THREADS"] = str(threads)
    env["OPENBLAS_NUM_THREADS"] = str(threads)
    if precision == "fp32":
        env["OMP_WAIT_POLICY"] = "PASSIVE"
    else:
        env.pop("OMP_WAIT_POLICY", None)
    if blas_dir:
        old = env.get("LD_LIBRARY_PATH")
        env["LD_LIBRARY_PATH"] = blas_dir + (":" + old if old else "")
    return env


def run_pytorch(args, precision, env, label):
    cmd = [sys.executable, os.path.abspath(__file__), "--worker", precision,
           "--workload", args.workload, "--threads", str(args.threads),
           "--steps", str(args.steps)]
    log(f"[compare] {label} ...")
    t0 = time.time()
    try:
        p = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           text=True, timeout=args.timeout)
    except subprocess.TimeoutExpired:
        return None, f"timed out after {args.timeout} s"
    if p.returncode != 0:
        tail = (p.stderr or "").strip().splitlines()[-3:]
        return None, f"worker exited {p.returncode}: " + " | ".join(tail)
    for line in reversed(p.stdout.strip().splitlines()):
        try:
            r = json.loads(line)
            log(f"[compare]   {r['ms_per_step']:.1f} ms/step "
                f"(blas {r['blas']['kind']}, {time.time() - t0:.0f} s)")
            return r, None
        except (ValueError, KeyError):
            continue
    return None, "worker printed no JSON line"


def resolve_crucible(path):
    if os.path.isabs(path) or os.path.exists(path):
        return path
    alt = os.path.join(REPO, path)
    return alt if os.path.exists(alt) else path


def run_crucible(args):
    exe = resolve_crucible(args.crucible)
    if not (os.path.isfile(exe) and os.access(exe, os.X_OK)):
        return None, f"crucible binary not found at '{args.crucible}' (build it first)"
    cmd = [exe, "bench", "step", "--workload", args.workload, "--threads",
           str(args.threads), "--steps", str(args.steps), "--json"]
    log(f"[compare] crucible: {' '.join(cmd)}")
    try:
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                           timeout=args.timeout)
    except subprocess.TimeoutExpired:
        return None, f"'{' '.join(cmd)}' timed out after {args.timeout} s"
    except OSError as e:
        return None, f"could not run crucible: {e}"
    if p.returncode != 0:
        tail = " | ".join((p.stderr or p.stdout or "").strip().splitlines()[-3:])
        return None, f"'{' '.join(cmd)}' exited {p.returncode}: {tail}"
    r = None
    text = p.stdout.strip()
    try:
        r = json.loads(text)
    except ValueError:
        for line in reversed(text.splitlines()):
            try:
                r = json.loads(line)
                break
            except ValueError:
                continue
    if not isinstance(r, dict):
        return None, "crucible printed no JSON object"
    if not isinstance(r.get("ms_per_step"), (int, float)) or r["ms_per_step"] <= 0:
        return None, "crucible's JSON has no positive ms_per_step"
    return r, None


def fmt(v, spec):
    return format(v, spec) if isinstance(v, (int, float)) else "-"


def main(argv=None):
    ap = argparse.ArgumentParser(
        description="Time the GPT-2 training step in PyTorch next to crucible's.")
    ap.add_argument("--workload", required=True, choices=sorted(WORKLOADS))
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--steps", type=int, default=10,
                    help=f"timed steps (after {WARMUP} warm-up steps)")
    ap.add_argument("--crucible", default="build/crucible")
    ap.add_argument("--json", action="store_true", help="print one JSON object")
    ap.add_argument("--timeout", type=float, default=3600,
                    help="seconds allowed for each measurement (default 3600)")
    ap.add_argument("--torch-blas-dir", default=None,
                    help="directory with the libblas.so.3 PyTorch's best env should "
                         "load (default: an installed OpenBLAS when torch's default "
                         "libblas.so.3 is the reference BLAS)")
    ap.add_argument("--skip", default="",
                    help="comma-separated measurements to leave out: as-installed, bf16 "
                         "(each takes minutes where PyTorch has no fast BLAS / bf16 GEMM)")
    ap.add_argument("--worker", choices=("fp32", "bf16"), help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.threads < 1 or args.steps < 1:
        ap.error("--threads and --steps must be >= 1")
    if args.worker:
        return run_worker(args)
    skip = {x.strip() for x in args.skip.split(",") if x.strip()}
    if skip - {"as-installed", "bf16"}:
        ap.error(f"--skip: unknown measurement(s) {sorted(skip - {'as-installed', 'bf16'})}"
                 f" (expected as-installed, bf16)")

    w = WORKLOADS[args.workload]
    tokens = w["batch"] * w["seq_len"]
    est_flop, n_params = flop_per_step(w)
    blas_dir = torch_blas_dir(args.torch_blas_dir)
    notes = []
    load_start = os.getloadavg()[0]

    rows = {}  # key -> (label, result or None, error or None)
    variants = [
        ("pytorch_fp32_best", "pytorch fp32 (best env)", "fp32",
         best_env(args.threads, "fp32", blas_dir)),
        ("pytorch_fp32_as_installed", "pytorch fp32 (as installed)", "fp32",
         dict(os.environ)),
        ("pytorch_bf16_best", "pytorch bf16 autocast (best env)", "bf16",
         best_env(args.threads, "bf16", blas_dir)),
    ]
    variants = [v for v in variants
                if not (v[0] == "pytorch_fp32_as_installed" and "as-installed" in skip)
                and not (v[2] == "bf16" and "bf16" in skip)]
    for key, label, prec, env in variants:
        r, err = run_pytorch(args, prec, env, label)
        rows[key] = (label, r, err)
        if err:
            notes.append(f"{label}: FAILED: {err}")

    cr, cerr = run_crucible(args)
    if cerr:
        notes.append(f"crucible: {cerr}")
    rows["crucible_fp32"] = ("crucible fp32", cr, cerr)

    # FLOPs per step: crucible's own count when it gives one, else the estimate.
    gflop = None
    gflop_source = "estimate 6N+12LCT (N incl. wte as LM head, excl. wpe)"
    if cr and isinstance(cr.get("gflop_per_step"), (int, float)):
        gflop, gflop_source = float(cr["gflop_per_step"]), "crucible's gflop_per_step"
    else:
        gflop = est_flop / 1e9
    cms = cr["ms_per_step"] if cr else None
    cmfu = cr.get("mfu") if cr and isinstance(cr.get("mfu"), (int, float)) else None

    for key, (label, r, _) in rows.items():
        if not r:
            continue
        if key == "crucible_fp32" and isinstance(r.get("gflops"), (int, float)):
            pass  # crucible's own figure
        else:
            r["gflops"] = gflop / (r["ms_per_step"] / 1e3)
        if key != "crucible_fp32":
            r["ratio_pytorch_over_crucible"] = (r["ms_per_step"] / cms) if cms else None
            # Same work against the same ceiling: MFU scales with 1/time.
            r["mfu"] = cmfu * cms / r["ms_per_step"] if cmfu is not None else None
        if key.startswith("pytorch") and r["blas"]["kind"] == "reference":
            notes.append(f"{label}: PyTorch ran on the reference (netlib) BLAS "
                         f"({r['blas']['path']}), ~30x slower than OpenBLAS; install "
                         f"libopenblas0-pthread for a fair comparison")

    best_fp32 = rows["pytorch_fp32_best"][1]
    winner = None
    if cr and best_fp32:
        ratio = best_fp32["ms_per_step"] / cms
        if ratio > 1:
            winner = f"crucible fp32 is {ratio:.2f}x faster than PyTorch fp32 (best env)"
        elif ratio < 1:
            winner = (f"PyTorch fp32 (best env) is {1 / ratio:.2f}x faster than "
                      f"crucible fp32")
        else:
            winner = "tie between crucible fp32 and PyTorch fp32 (best env)"
        fastest = min((r["ms_per_step"], label) for label, r, _ in rows.values() if r)
        winner += f"; fastest of all: {fastest[1]} ({fastest[0]:.1f} ms/step)"
    elif best_fp32:
        winner = "no winner: crucible was not measured"

    load_end = os.getloadavg()[0]
    ncpu = os.cpu_count() or 1
    if max(load_start, load_end) > ncpu:
        notes.append(f"the machine was busy (1-min load average {load_start:.1f} at the "
                     f"start, {load_end:.1f} at the end, {ncpu} CPUs): other work "
                     f"competed for the cores, so these timings are unreliable")
    pytorch_ok = all(rows[k][1] for k, *_ in variants)
    result = {
        "workload": args.workload,
        "config": w,
        "threads": args.threads,
        "steps": args.steps,
        "warmup": WARMUP,
        "tokens_per_step": tokens,
        "gflop_per_step": gflop,
        "gflop_source": gflop_source,
        "estimate_params_N": n_params,
        "estimate_gflop_per_step": est_flop / 1e9,
        "pytorch_best_env_blas_dir": blas_dir,
        "results": {k: r for k, (_, r, _) in rows.items()},
        "errors": {k: e for k, (_, _, e) in rows.items() if e},
        "winner": winner,
        "load_average": [load_start, load_end],
        "notes": notes,
        "pytorch_ok": pytorch_ok,
    }

    if args.json:
        print(json.dumps(result, indent=None))
    else:
        print(f"workload {args.workload}: {w['n_layer']} layers, {w['n_head']} heads, "
              f"width {w['n_embd']}, vocab {w['vocab_size']}, seq {w['seq_len']}, "
              f"batch {w['batch']} ({tokens} tokens/step); {args.threads} threads, "
              f"{args.steps} timed steps after {WARMUP} warm-up, median")
        print(f"FLOPs/step {gflop:.1f} GFLOP ({gflop_source})")
        hdr = f"{'':34} {'ms/step':>10} {'tokens/s':>10} {'GFLOP/s':>9} {'MFU':>7} " \
              f"{'pytorch_ms/crucible_ms':>23}  blas"
        print(hdr)
        print("-" * len(hdr))
        for key, (label, r, err) in rows.items():
            if not r:
                print(f"{label:34} {'(not measured: see notes)':>42}")
                continue
            ratio = r.get("ratio_pytorch_over_crucible") if key != "crucible_fp32" else None
            mfu = r.get("mfu")
            mfu_s = f"{100 * mfu:.1f}%" if isinstance(mfu, (int, float)) else "-"
            blas = r["blas"]["kind"] if "blas" in r and isinstance(r["blas"], dict) else ""
            print(f"{label:34} {r['ms_per_step']:>10.1f} {r['tokens_per_s']:>10.0f} "
                  f"{r['gflops']:>9.1f} {mfu_s:>7} "
                  f"{(fmt(ratio, '.2f') if key != 'crucible_fp32' else ''):>23}  {blas}")
        print(f"ratio > 1 means crucible is faster")
        if winner:
            print(f"winner: {winner}")
        for n in notes:
            print(f"note: {n}")
    return 0 if pytorch_ok else 1


if __name__ == "__main__":
    sys.exit(main())
