#!/usr/bin/python3
"""Times one GPT-2 training step in PyTorch next to crucible's, in the same run.

    /usr/bin/python3 bench/compare_pytorch.py --workload tiny|gpt2-124M \
        [--threads N] [--steps K] [--crucible build/crucible] [--json] \
        [--torch2 .venv-torch2/bin/python] [--skip NAME,...]

Training step (every side): zero grads, forward, mean cross-entropy, backward,
AdamW(lr 3e-4, wd 0.1 on the blocks' 2-D matmul weights) step; the same batch of
random tokens every step.

PyTorch measurements, each in its own subprocess (this script re-invoked with
the hidden --worker flag), run one after another.  --skip names in brackets.

PyTorch 1.13 (Debian's, /usr/bin/python3), the model of tests/parity/gpt2_torch.py
(one model definition), eager, AdamW with its defaults, zero_grad(set_to_none=False):
  [fp32]         fp32 (best env): OPENBLAS_CORETYPE / OPENBLAS_L2_SIZE unset,
                 GLIBC_TUNABLES raising malloc's mmap and trim thresholds (no
                 page-fault churn on the big activations), OMP_NUM_THREADS=N,
                 OPENBLAS_NUM_THREADS=N, OMP_WAIT_POLICY=PASSIVE; and when torch's
                 libblas.so.3 is the slow reference (netlib) BLAS but an OpenBLAS
                 is installed, that OpenBLAS via LD_LIBRARY_PATH.
  [as-installed] fp32 (as installed): the environment untouched (reference only).
  [bf16]         bf16 autocast (best env): the best env without OMP_WAIT_POLICY,
                 forward + loss under torch.autocast('cpu', dtype=torch.bfloat16).

PyTorch 2 (PyPI's wheel in the venv of `bash bench/torch2_venv.sh`; workers run
with the --torch2 interpreter, default .venv-torch2/bin/python in the repository,
and are skipped with a note when it is absent), written as a PyTorch expert would
(bench/gpt2_torch2.py): the same GPT-2 and init with attention through
F.scaled_dot_product_attention(is_causal=True), the loss inside the module,
zero_grad(set_to_none=True), torch.optim.AdamW(fused=True) (foreach=True, with a
note, where fused is unavailable).  Environment: GLIBC_TUNABLES as above,
OMP_NUM_THREADS=N; no BLAS swap (the wheel brings MKL / oneDNN) and libgomp's
default wait policy.  [torch2] leaves out all four:
  [torch2-eager-fp32]    fp32, eager
  [torch2-compile-fp32]  fp32, torch.compile(default mode) of model + loss
  [torch2-eager-bf16]    forward + loss under torch.autocast('cpu', bfloat16),
                         backward outside, eager
  [torch2-compile-bf16]  the same, compiled
A compile that fails is reported as that configuration failed (the error's first
line, and the compiler's 'error:' line when there is one); the others still run.

Every worker calls torch.set_num_threads(N).  Each does WARMUP (3) warm-up steps
(compiled configurations at least 3: the first step compiles forward and backward,
its time is reported as compile_s), then K timed steps, and reports the median.

Then crucible, environment untouched, once per precision:
    <crucible> bench step --workload W --threads N --steps K --precision fp32 --json
    <crucible> bench step --workload W --threads N --steps K --precision bf16 --json
If one is missing or fails, that is said, and the other figures are still printed.
Exit code 0 iff every PyTorch measurement that ran succeeded.

Ratio columns are pytorch_ms / crucible_ms against crucible fp32 and crucible
bf16: > 1 means crucible is faster.  MFU of a PyTorch row is crucible's MFU of the
row's precision (against that precision's peak) scaled by the time ratio.  The
headline compares crucible bf16 with PyTorch 2's fastest configuration.
"""

import argparse
import json
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
COMPILE_WARMUP_MIN = 3  # the first step compiles forward and backward
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
# PyTorch 2 configurations: --skip / --worker name -> (result key, label, precision,
# compiled).
TORCH2_CONFIGS = {
    "torch2-eager-fp32": ("torch2_eager_fp32", "pytorch2 fp32 eager", "fp32", False),
    "torch2-compile-fp32": ("torch2_compile_fp32", "pytorch2 fp32 compile", "fp32", True),
    "torch2-eager-bf16": ("torch2_eager_bf16", "pytorch2 bf16 autocast eager", "bf16",
                          False),
    "torch2-compile-bf16": ("torch2_compile_bf16", "pytorch2 bf16 autocast compile",
                            "bf16", True),
}
SKIP_NAMES = ("fp32", "as-installed", "bf16", "torch2") + tuple(TORCH2_CONFIGS)
TORCH2_VENV_PYTHON = os.path.join(REPO, ".venv-torch2", "bin", "python")
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


def timed_steps(step, warmup, steps):
    """Runs warmup + steps calls of step(); (timed seconds, losses, first step's s)."""
    times, losses, first = [], [], None
    for i in range(warmup + steps):
        t0 = time.perf_counter()
        losses.append(step())
        dt = time.perf_counter() - t0
        if i == 0:
            first = dt
        if i >= warmup:
            times.append(dt)
    return times, losses, first


def worker_summary(args, times, losses, warmup, torch, blas):
    w = WORKLOADS[args.workload]
    med = statistics.median(times)
    return {
        "ms_per_step": med * 1e3,
        "tokens_per_s": w["batch"] * w["seq_len"] / med,
        "threads": args.threads,
        "ms_min": min(times) * 1e3,
        "ms_mean": statistics.mean(times) * 1e3,
        "steps": args.steps,
        "warmup": warmup,
        "loss_first": losses[0],
        "loss_last": losses[-1],
        "torch": torch.__version__,
        "torch_threads": torch.get_num_threads(),
        "blas": blas,
        "env": {k: os.environ[k] for k in ENV_KEYS if k in os.environ},
    }


def batch_of(torch, w):
    g = torch.Generator().manual_seed(1)
    tok = torch.randint(0, w["vocab_size"], (w["batch"], w["seq_len"] + 1), generator=g)
    return tok[:, :-1].contiguous(), tok[:, 1:].contiguous()


def run_worker(args):
    """PyTorch 1.13 worker (--worker fp32 | bf16)."""
    import torch
    from gpt2_torch import GPT, lm_loss, param_groups

    torch.set_num_threads(args.threads)
    w = WORKLOADS[args.workload]
    torch.manual_seed(0)
    model = GPT(w["n_layer"], w["n_head"], w["n_embd"], w["vocab_size"], w["seq_len"])
    model.init_weights(std=0.02, seed=0)
    model.train()
    opt = torch.optim.AdamW(param_groups(model, WEIGHT_DECAY), lr=LR)
    x, y = batch_of(torch, w)
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

    times, losses, _ = timed_steps(step, WARMUP, args.steps)
    out = {"precision": args.worker}
    out.update(worker_summary(args, times, losses, WARMUP, torch, loaded_blas()))
    print(json.dumps(out), flush=True)
    return 0


def run_worker_torch2(args):
    """PyTorch 2 worker (--worker torch2-...), run with the --torch2 interpreter.
    Prints one JSON line; on failure {"error": ...} and exit code 3."""
    import traceback

    import torch
    from gpt2_torch2 import TrainingLoss, adamw, first_line, gpt2_sdpa, param_groups

    _, _, precision, compiled = TORCH2_CONFIGS[args.worker]
    warmup = max(WARMUP, COMPILE_WARMUP_MIN) if compiled else WARMUP
    torch.set_num_threads(args.threads)
    w = WORKLOADS[args.workload]
    torch.manual_seed(0)
    model = gpt2_sdpa(w["n_layer"], w["n_head"], w["n_embd"], w["vocab_size"], w["seq_len"])
    model.init_weights(std=0.02, seed=0)
    model.train()
    opt, opt_kind, opt_note = adamw(model, LR, WEIGHT_DECAY)
    notes = [opt_note] if opt_note else []
    loss_fn = TrainingLoss(model)
    if compiled:
        loss_fn = torch.compile(loss_fn)
    x, y = batch_of(torch, w)
    done = [0]

    def optimizer_step():
        nonlocal opt, opt_kind
        try:
            opt.step()
        except RuntimeError as e:  # fused may only refuse at its first step
            if opt_kind != "fused" or done[0] > 0:
                raise
            notes.append(f"AdamW(fused=True) failed at its first step ({first_line(e)}); "
                         f"foreach=True")
            opt = torch.optim.AdamW(param_groups(model, WEIGHT_DECAY), lr=LR, foreach=True)
            opt_kind = "foreach"
            opt.step()

    def step():
        opt.zero_grad(set_to_none=True)
        if precision == "bf16":
            with torch.autocast("cpu", dtype=torch.bfloat16):
                loss = loss_fn(x, y)
        else:
            loss = loss_fn(x, y)
        loss.backward()
        optimizer_step()
        done[0] += 1
        return loss.item()

    try:
        times, losses, first = timed_steps(step, warmup, args.steps)
    except Exception as e:  # a compile failure is a result: say why, let the rest run
        traceback.print_exc()
        phase = "compile" if compiled and done[0] == 0 else "step"
        print(json.dumps({"error": f"{phase}: {first_line(e)}"}), flush=True)
        return 3
    blas = {"path": None,
            "kind": "mkl" if torch.backends.mkl.is_available() else "bundled",
            "mkldnn": torch.backends.mkldnn.is_available(),
            "cpu_capability": torch.backends.cpu.get_cpu_capability()}
    out = {"precision": precision, "config": args.worker, "compiled": compiled,
           "optimizer": f"AdamW({opt_kind}=True)", "attention": "sdpa(is_causal=True)"}
    if compiled:
        out["compile_s"] = first
    out.update(worker_summary(args, times, losses, warmup, torch, blas))
    out["notes"] = notes
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


def torch2_env(threads):
    """The PyTorch 2 workers' environment: the best env's malloc thresholds and thread
    count; the wheel brings its own BLAS (MKL / oneDNN) and OpenMP, so no BLAS swap
    and libgomp's default wait policy (inductor's kernels are many short parallel
    regions)."""
    env = dict(os.environ)
    env["GLIBC_TUNABLES"] = GLIBC_TUNABLES
    env["OMP_NUM_THREADS"] = str(threads)
    env.pop("OMP_WAIT_POLICY", None)
    return env


def resolve_torch2(explicit):
    """(python path or None, why not): --torch2 given (an interpreter or a venv
    directory), else the repository's .venv-torch2 when it exists."""
    if explicit is None:
        if os.path.isfile(TORCH2_VENV_PYTHON):
            return TORCH2_VENV_PYTHON, None
        return None, ("PyTorch 2 peer skipped: no .venv-torch2/bin/python in the "
                      "repository (create it with: bash bench/torch2_venv.sh)")
    path = explicit
    if os.path.isdir(path):
        path = os.path.join(path, "bin", "python")
    if not (os.path.isfile(path) and os.access(path, os.X_OK)):
        return None, (f"PyTorch 2 peer skipped: --torch2 '{explicit}' is not a python "
                      f"interpreter (create the venv with: bash bench/torch2_venv.sh)")
    return path, None


def run_pytorch(args, worker, env, label, python=None):
    cmd = [python or sys.executable, os.path.abspath(__file__), "--worker", worker,
           "--workload", args.workload, "--threads", str(args.threads),
           "--steps", str(args.steps)]
    log(f"[compare] {label} ...")
    t0 = time.time()
    try:
        p = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           text=True, timeout=args.timeout)
    except subprocess.TimeoutExpired:
        return None, f"timed out after {args.timeout} s"
    except OSError as e:
        return None, f"could not run {cmd[0]}: {e}"
    reported = None
    for line in reversed(p.stdout.strip().splitlines()):
        try:
            r = json.loads(line)
        except ValueError:
            continue
        if isinstance(r, dict):
            reported = r
            break
    if reported and "error" in reported:
        log(f"[compare]   FAILED: {reported['error']}")
        return None, reported["error"]
    if p.returncode != 0:
        tail = (p.stderr or "").strip().splitlines()[-3:]
        return None, f"worker exited {p.returncode}: " + " | ".join(tail)
    if not reported or not isinstance(reported.get("ms_per_step"), (int, float)):
        return None, "worker printed no JSON line"
    extra = f", compile {reported['compile_s']:.0f} s" if "compile_s" in reported else ""
    log(f"[compare]   {reported['ms_per_step']:.1f} ms/step "
        f"(blas {reported['blas']['kind']}{extra}, {time.time() - t0:.0f} s)")
    return reported, None


def resolve_crucible(path):
    if os.path.isabs(path) or os.path.exists(path):
        return path
    alt = os.path.join(REPO, path)
    return alt if os.path.exists(alt) else path


def run_crucible(args, precision):
    exe = resolve_crucible(args.crucible)
    if not (os.path.isfile(exe) and os.access(exe, os.X_OK)):
        return None, f"crucible binary not found at '{args.crucible}' (build it first)"
    cmd = [exe, "bench", "step", "--workload", args.workload, "--threads",
           str(args.threads), "--steps", str(args.steps), "--precision", precision, "--json"]
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
    if r.get("precision", precision) != precision:
        return None, (f"crucible ran precision '{r.get('precision')}', asked for "
                      f"'{precision}' (an older build without --precision?)")
    return r, None


def fmt(v, spec):
    return format(v, spec) if isinstance(v, (int, float)) else "-"


def faster(a_label, a_ms, b_label, b_ms):
    """'A is X.XXx faster than B', or the other way round, or a tie."""
    ratio = b_ms / a_ms
    if ratio > 1:
        return f"{a_label} is {ratio:.2f}x faster than {b_label}"
    if ratio < 1:
        return f"{b_label} is {1 / ratio:.2f}x faster than {a_label}"
    return f"tie between {a_label} and {b_label}"


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
    ap.add_argument("--torch2", default=None, metavar="PYTHON",
                    help="python of the PyTorch 2 venv (or the venv's directory) for the "
                         "PyTorch 2 peer (default: .venv-torch2/bin/python in the "
                         "repository if it exists; make it with bash bench/torch2_venv.sh)")
    ap.add_argument("--skip", default="",
                    help="comma-separated measurements to leave out: "
                         + ", ".join(SKIP_NAMES) + " (torch2: all four PyTorch 2 "
                         "configurations; as-installed and bf16 take minutes where "
                         "PyTorch 1.13 has no fast BLAS / bf16 GEMM)")
    ap.add_argument("--worker", choices=("fp32", "bf16") + tuple(TORCH2_CONFIGS),
                    help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.threads < 1 or args.steps < 1:
        ap.error("--threads and --steps must be >= 1")
    if args.worker in TORCH2_CONFIGS:
        return run_worker_torch2(args)
    if args.worker:
        return run_worker(args)
    skip = {x.strip() for x in args.skip.split(",") if x.strip()}
    if skip - set(SKIP_NAMES):
        ap.error(f"--skip: unknown measurement(s) {sorted(skip - set(SKIP_NAMES))}"
                 f" (expected {', '.join(SKIP_NAMES)})")

    w = WORKLOADS[args.workload]
    tokens = w["batch"] * w["seq_len"]
    est_flop, n_params = flop_per_step(w)
    blas_dir = torch_blas_dir(args.torch_blas_dir)
    notes = []
    load_start = os.getloadavg()[0]

    rows = {}  # key -> (label, result or None, error or None)
    # (key, label, worker, env, python, skip name)
    variants = [
        ("pytorch_fp32_best", "pytorch fp32 (best env)", "fp32",
         best_env(args.threads, "fp32", blas_dir), None, "fp32"),
        ("pytorch_fp32_as_installed", "pytorch fp32 (as installed)", "fp32",
         dict(os.environ), None, "as-installed"),
        ("pytorch_bf16_best", "pytorch bf16 autocast (best env)", "bf16",
         best_env(args.threads, "bf16", blas_dir), None, "bf16"),
    ]
    torch2_python, torch2_why = None, None
    torch2_wanted = [n for n in TORCH2_CONFIGS if n not in skip and "torch2" not in skip]
    if torch2_wanted:
        torch2_python, torch2_why = resolve_torch2(args.torch2)
        if torch2_why:
            log(f"[compare] {torch2_why}")
            notes.append(torch2_why)
        else:
            env2 = torch2_env(args.threads)
            variants += [(TORCH2_CONFIGS[n][0], TORCH2_CONFIGS[n][1], n, env2, torch2_python,
                          n) for n in torch2_wanted]
    variants = [v for v in variants if v[5] not in skip]
    precision_of = {}
    for key, label, worker, env, python, _ in variants:
        r, err = run_pytorch(args, worker, env, label, python)
        rows[key] = (label, r, err)
        precision_of[key] = TORCH2_CONFIGS[worker][2] if worker in TORCH2_CONFIGS else worker
        if err:
            notes.append(f"{label}: FAILED: {err}")
        for n in (r or {}).get("notes", []):
            notes.append(f"{label}: {n}")

    crucible = {}  # precision -> result or None
    for prec in ("fp32", "bf16"):
        cr, cerr = run_crucible(args, prec)
        if cerr:
            notes.append(f"crucible {prec}: {cerr}")
        rows[f"crucible_{prec}"] = (f"crucible {prec}", cr, cerr)
        crucible[prec] = cr
    cr, crb = crucible["fp32"], crucible["bf16"]

    # FLOPs per step: crucible's own count when it gives one, else the estimate.
    gflop = None
    gflop_source = "estimate 6N+12LCT (N incl. wte as LM head, excl. wpe)"
    counted = next((c for c in (cr, crb)
                    if c and isinstance(c.get("gflop_per_step"), (int, float))), None)
    if counted:
        gflop, gflop_source = float(counted["gflop_per_step"]), "crucible's gflop_per_step"
    else:
        gflop = est_flop / 1e9
    cms = {p: (c["ms_per_step"] if c else None) for p, c in crucible.items()}
    cmfu = {p: (c.get("mfu") if c and isinstance(c.get("mfu"), (int, float)) else None)
            for p, c in crucible.items()}

    for key, (label, r, _) in rows.items():
        if not r:
            continue
        if key.startswith("crucible_"):
            if not isinstance(r.get("gflops"), (int, float)):
                r["gflops"] = gflop / (r["ms_per_step"] / 1e3)
            continue
        r["gflops"] = gflop / (r["ms_per_step"] / 1e3)
        for p in ("fp32", "bf16"):
            r[f"ratio_over_crucible_{p}"] = (r["ms_per_step"] / cms[p]) if cms[p] else None
        r["ratio_pytorch_over_crucible"] = r["ratio_over_crucible_fp32"]  # as before
        # Same work against the same ceiling: MFU scales with 1/time.
        p = precision_of[key]
        r["mfu"] = cmfu[p] * cms[p] / r["ms_per_step"] if cmfu[p] is not None else None
        if r["blas"]["kind"] == "reference":
            notes.append(f"{label}: PyTorch ran on the reference (netlib) BLAS "
                         f"({r['blas']['path']}), ~30x slower than OpenBLAS; install "
                         f"libopenblas0-pthread for a fair comparison")

    best_fp32 = rows.get("pytorch_fp32_best", (None, None, None))[1]
    winner = None
    if cr and best_fp32:
        winner = faster("crucible fp32", cms["fp32"], "PyTorch fp32 (best env)",
                        best_fp32["ms_per_step"])
    elif best_fp32:
        winner = "no winner: crucible was not measured"
    measured = [(r["ms_per_step"], label) for label, r, _ in rows.values() if r]
    if (cr or crb) and measured:
        fastest = min(measured)
        winner = (winner + "; " if winner else "") + \
            f"fastest of all: {fastest[1]} ({fastest[0]:.1f} ms/step)"

    # Headline: crucible bf16 against PyTorch 2's fastest configuration.
    torch2_rows = [(r["ms_per_step"], key, label) for key, (label, r, _) in rows.items()
                   if key.startswith("torch2_") and r]
    torch2_best = min(torch2_rows) if torch2_rows else None
    headline = None
    if torch2_best and crb:
        headline = faster("crucible bf16", cms["bf16"],
                          f"PyTorch 2's best ({torch2_best[2]}, {torch2_best[0]:.1f} ms/step)",
                          torch2_best[0])
    elif torch2_best:
        headline = "no headline: crucible bf16 was not measured"
    elif torch2_wanted:
        headline = "no headline: no PyTorch 2 configuration was measured"

    load_end = os.getloadavg()[0]
    ncpu = os.cpu_count() or 1
    if max(load_start, load_end) > ncpu:
        notes.append(f"the machine was busy (1-min load average {load_start:.1f} at the "
                     f"start, {load_end:.1f} at the end, {ncpu} CPUs): other work "
                     f"competed for the cores, so these timings are unreliable")
    pytorch_ok = all(rows[v[0]][1] for v in variants)
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
        "torch2_python": torch2_python,
        "results": {k: r for k, (_, r, _) in rows.items()},
        "errors": {k: e for k, (_, _, e) in rows.items() if e},
        "winner": winner,
        "torch2_best": ({"key": torch2_best[1], "ms_per_step": torch2_best[0],
                         "ratio_over_crucible_bf16": rows[torch2_best[1]][1][
                             "ratio_over_crucible_bf16"]} if torch2_best else None),
        "headline": headline,
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
              f"{'/crucible fp32':>14} {'/crucible bf16':>14}  blas"
        print(hdr)
        print("-" * len(hdr))
        for key, (label, r, err) in rows.items():
            if not r:
                print(f"{label:34} {'(not measured: see notes)':>42}")
                continue
            crucible_row = key.startswith("crucible_")
            mfu = r.get("mfu")
            mfu_s = f"{100 * mfu:.1f}%" if isinstance(mfu, (int, float)) else "-"
            blas = r["blas"]["kind"] if "blas" in r and isinstance(r["blas"], dict) else ""
            r32 = "" if crucible_row else fmt(r.get("ratio_over_crucible_fp32"), ".2f")
            r16 = "" if crucible_row else fmt(r.get("ratio_over_crucible_bf16"), ".2f")
            print(f"{label:34} {r['ms_per_step']:>10.1f} {r['tokens_per_s']:>10.0f} "
                  f"{r['gflops']:>9.1f} {mfu_s:>7} {r32:>14} {r16:>14}  {blas}")
        print("ratio = pytorch_ms / crucible_ms: > 1 means crucible is faster; "
              "MFU against the row's precision's peak")
        if winner:
            print(f"winner: {winner}")
        if headline:
            print(f"headline: {headline}")
        for n in notes:
            print(f"note: {n}")
    return 0 if pytorch_ok else 1


if __name__ == "__main__":
    sys.exit(main())
