#!/usr/bin/env python3
"""`crucible serve` against Hugging Face transformers' generate on the same model
and machine, in the same run (docs/performance.md, "Serving").

For each model shape (tiny: 4x256, vocab 8192, context 256; gpt2-124M: 12x768,
vocab 50257, context 1024) it makes a randomly initialised GPT2LMHeadModel with
a byte-level BPE trained on fortunes, `crucible import`s it, and then measures:

  crucible serve  closed-loop load of 1, 8 and 32 concurrent streaming clients
                  (asyncio, raw HTTP on loopback, one thread), each sending the
                  next request of a fixed mixed set as soon as its last ends:
                  prompts of 16-128 tokens, 32-128 new tokens (ignore_eos, so
                  both sides generate exactly that many, greedy);
  transformers    model.generate(do_sample=False) on the same requests, batch
                  1 (one after another) and static batches of 8 and 32
                  (left-padded; a batch runs until its longest request ends,
                  and only each request's own tokens count as useful).

Figures: total generated tokens per second; time to first token and
inter-token latency, p50 and p99 (for transformers at batch 1: the prefill's
time, and the decode time per token). The client shares the machine's cores
with the server; transformers runs with the same thread count. crucible is
measured in each precision asked (fp32, bf16); transformers in fp32.

Run it with PyTorch 2 from PyPI (bench/torch2_venv.sh makes that venv, with
transformers): Debian's torch 1.13 is built on a generic BLAS and would make
a peer several times slower than its users see.

  .venv-torch2/bin/python bench/serve_bench.py [--models tiny,gpt2-124M]
      [--streams 1,8,32] [--precision fp32,bf16] [--out DIR]
"""
import argparse
import asyncio
import json
import os
import random
import re
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SHAPES = {
    "tiny": dict(n_layer=4, n_head=4, n_embd=256, vocab=8192, ctx=256),
    "gpt2-124M": dict(n_layer=12, n_head=12, n_embd=768, vocab=50257, ctx=1024),
}


def pct(xs, p):
    if not xs:
        return float("nan")
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100.0 * (len(xs) - 1))))]


def make_hf_model(d, shape):
    import torch
    from tokenizers import ByteLevelBPETokenizer
    from transformers import GPT2Config, GPT2LMHeadModel
    sys.path.insert(0, os.path.join(ROOT, "tests", "hf"))
    from hf_side import fortunes_text
    os.makedirs(d, exist_ok=True)
    tok = ByteLevelBPETokenizer()
    tok.train_from_iterator(fortunes_text(2_000_000), vocab_size=min(shape["vocab"], 8192),
                            min_frequency=2, special_tokens=["<|endoftext|>"], show_progress=False)
    tok.save_model(d)
    torch.manual_seed(0)
    cfg = GPT2Config(n_layer=shape["n_layer"], n_head=shape["n_head"], n_embd=shape["n_embd"],
                     n_positions=shape["ctx"], vocab_size=shape["vocab"], bos_token_id=0, eos_token_id=0)
    GPT2LMHeadModel(cfg).save_pretrained(d, safe_serialization=True)
    return tok.get_vocab_size()


def requests(n, tok_vocab, seed=7):
    rnd = random.Random(seed)
    return [([rnd.randrange(1, tok_vocab) for _ in range(rnd.randint(16, 128))], rnd.randint(32, 128))
            for _ in range(n)]


# --- crucible serve ----------------------------------------------------------

async def one_stream(port, model, prompt, n, rec):
    body = json.dumps({"model": model, "prompt": prompt, "max_tokens": n, "temperature": 0,
                       "stream": True, "ignore_eos": True, "return_token_ids": True}).encode()
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    t0 = time.perf_counter()
    writer.write(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                 b"Connection: close\r\nContent-Length: %d\r\n\r\n" % len(body) + body)
    await writer.drain()
    head = await reader.readuntil(b"\r\n\r\n")
    if b" 200 " not in head.split(b"\r\n", 1)[0]:
        raise RuntimeError(head + await reader.read())
    last, tokens = None, 0
    buf = b""
    while True:
        line = await reader.readline()  # chunked: size line, data, CRLF
        if not line:
            break
        size = int(line.strip() or b"0", 16)
        if size == 0:
            break
        data = await reader.readexactly(size + 2)
        buf += data[:-2]
        while b"\n\n" in buf:
            ev, buf = buf.split(b"\n\n", 1)
            payload = ev[6:]
            if payload == b"[DONE]":
                continue
            j = json.loads(payload)
            k = len(j["choices"][0].get("token_ids", [])) if j["choices"] else 0
            if not k:
                continue
            now = time.perf_counter()
            if last is None:
                rec["ttft"].append(now - t0)
            else:
                rec["itl"].append((now - last) / k)
            last = now
            tokens += k
    writer.close()
    rec["tokens"] += tokens


async def load(port, model, reqs, streams):
    rec = {"ttft": [], "itl": [], "tokens": 0}
    queue = list(reqs)

    async def client():
        while queue:
            prompt, n = queue.pop(0)
            await one_stream(port, model, prompt, n, rec)

    t0 = time.perf_counter()
    await asyncio.gather(*[client() for _ in range(streams)])
    rec["seconds"] = time.perf_counter() - t0
    return rec


def bench_crucible(crucible, run, reqs, streams_list, precision, max_batch, extra):
    proc = subprocess.Popen([crucible, "serve", run, "--port", "0", "--model-name", "m", "--precision",
                             precision, "--max-batch", str(max_batch)] + extra,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    port = None
    for line in proc.stdout:
        m = re.search(r"listening on http://127\.0\.0\.1:(\d+)", line)
        if m:
            port = int(m.group(1))
            break
    if port is None:
        raise RuntimeError(proc.stderr.read())
    rows = {}
    try:
        asyncio.run(load(port, "m", reqs[:2], 2))  # warm-up: oneDNN's primitives
        for s in streams_list:
            n_req = max(3 * s, 12)
            rec = asyncio.run(load(port, "m", reqs[:n_req], s))
            rows[s] = rec
    finally:
        proc.terminate()
        proc.wait()
    return rows


# --- transformers ------------------------------------------------------------

def bench_transformers(hf_dir, reqs, batches, threads):
    import torch
    from transformers import GPT2LMHeadModel
    torch.set_num_threads(threads)
    model = GPT2LMHeadModel.from_pretrained(hf_dir).eval()
    out = {}
    with torch.inference_mode():
        # Batch 1, one request after another.
        n1 = 6
        toks, secs, ttft, itl = 0, 0.0, [], []
        for prompt, n in reqs[:n1]:
            ids = torch.tensor([prompt])
            mask = torch.ones_like(ids)
            t0 = time.perf_counter()
            model.generate(ids, attention_mask=mask, max_new_tokens=1, min_new_tokens=1, do_sample=False,
                           pad_token_id=0)
            t1 = time.perf_counter()
            model.generate(ids, attention_mask=mask, max_new_tokens=n, min_new_tokens=n, do_sample=False,
                           pad_token_id=0)
            t2 = time.perf_counter()
            ttft.append(t1 - t0)
            itl.append(((t2 - t1) - (t1 - t0)) / max(1, n - 1))
            toks += n
            secs += t2 - t1
        out[1] = {"tokens": toks, "seconds": secs, "ttft": ttft, "itl": itl}
        for b in batches:
            chunk = reqs[:b]
            width = max(len(p) for p, _ in chunk)
            ids = torch.tensor([[0] * (width - len(p)) + p for p, _ in chunk])
            mask = torch.tensor([[0] * (width - len(p)) + [1] * len(p) for p, _ in chunk])
            longest = max(n for _, n in chunk)
            t0 = time.perf_counter()
            model.generate(ids, attention_mask=mask, max_new_tokens=longest, min_new_tokens=longest,
                           do_sample=False, pad_token_id=0)
            secs = time.perf_counter() - t0
            out[b] = {"tokens": sum(n for _, n in chunk), "seconds": secs, "ttft": [], "itl": [],
                      "computed": longest * b}
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--models", default="tiny,gpt2-124M")
    ap.add_argument("--streams", default="1,8,32")
    ap.add_argument("--precision", default="fp32,bf16")
    ap.add_argument("--crucible", default=os.path.join(ROOT, "build", "crucible"))
    ap.add_argument("--out", default=None)
    ap.add_argument("--serve-args", default="", help="more `crucible serve` options, e.g. '--step-tokens 64'")
    ap.add_argument("--no-peer", action="store_true", help="crucible only (tuning runs)")
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    a = ap.parse_args()
    streams = [int(s) for s in a.streams.split(",")]
    work = a.out or tempfile.mkdtemp(prefix="serve_bench.")
    results = {}
    for name in a.models.split(","):
        shape = SHAPES[name]
        hf_dir, run = os.path.join(work, name + "-hf"), os.path.join(work, name + "-run")
        if not os.path.exists(run):
            tok_vocab = make_hf_model(hf_dir, shape)
            subprocess.run([a.crucible, "import", hf_dir, "-o", run], check=True, capture_output=True)
        else:
            tok_vocab = len(json.load(open(os.path.join(hf_dir, "vocab.json"))))
        reqs = requests(120, tok_vocab)
        import torch
        print("== %s (%d layers, %d wide, vocab %d, context %d), %d threads, torch %s"
              % (name, shape["n_layer"], shape["n_embd"], shape["vocab"], shape["ctx"], a.threads,
                 torch.__version__), flush=True)
        extra = a.serve_args.split() if a.serve_args else []
        cru = {p: bench_crucible(a.crucible, run, reqs, streams, p, max(streams), extra)
               for p in a.precision.split(",")}
        if a.no_peer:
            for p, rows in cru.items():
                for s_, r in rows.items():
                    print("crucible %s %d streams: %.0f tok/s, TTFT p50 %.1f p99 %.1f ms, ITL p50 %.2f p99 %.2f ms"
                          % (p, s_, r["tokens"] / r["seconds"], 1e3 * pct(r["ttft"], 50), 1e3 * pct(r["ttft"], 99),
                             1e3 * pct(r["itl"], 50), 1e3 * pct(r["itl"], 99)))
            continue
        hf = bench_transformers(hf_dir, reqs, [b for b in (8, 32)], a.threads)
        best_static = max((r["tokens"] / r["seconds"], b) for b, r in hf.items() if b > 1)
        hf_b1 = hf[1]["tokens"] / hf[1]["seconds"]
        print("| system | streams | tokens/s | TTFT p50 / p99 ms | ITL p50 / p99 ms |")
        print("|---|---|---|---|---|")
        for p, rows in cru.items():
            for s_, r in rows.items():
                print("| crucible serve, %s | %d | %.0f | %.1f / %.1f | %.2f / %.2f |"
                      % (p, s_, r["tokens"] / r["seconds"], 1e3 * pct(r["ttft"], 50), 1e3 * pct(r["ttft"], 99),
                         1e3 * pct(r["itl"], 50), 1e3 * pct(r["itl"], 99)))
        for b, r in hf.items():
            lat = ("%.1f / %.1f | %.2f / %.2f" % (1e3 * pct(r["ttft"], 50), 1e3 * pct(r["ttft"], 99),
                                                 1e3 * pct(r["itl"], 50), 1e3 * pct(r["itl"], 99))
                   if r["ttft"] else "- | -")
            print("| transformers generate, fp32, batch %d | %s | %.0f | %s |"
                  % (b, "1 at a time" if b == 1 else "static", r["tokens"] / r["seconds"], lat))
        top = max(streams)
        results[name] = {"transformers": {str(k): {"tokens": v["tokens"], "seconds": v["seconds"]}
                                          for k, v in hf.items()}, "torch": torch.__version__}
        for p, rows in cru.items():
            tps = rows[top]["tokens"] / rows[top]["seconds"]
            one = rows[streams[0]]
            summary = {"ratio_vs_best_static": tps / best_static[0], "ratio_vs_batch1": tps / hf_b1,
                       "p99_itl_over_single_p50": pct(rows[top]["itl"], 99) / pct(one["itl"], 50),
                       "p99_itl_over_single_p99": pct(rows[top]["itl"], 99) / pct(one["itl"], 99)}
            print("%s, %d streams: %.2fx transformers' best static batch (%d), %.2fx its batch 1; "
                  "p99 ITL %.2fx the single stream's p50, %.2fx its p99"
                  % (p, top, summary["ratio_vs_best_static"], best_static[1], summary["ratio_vs_batch1"],
                     summary["p99_itl_over_single_p50"], summary["p99_itl_over_single_p99"]), flush=True)
            results[name]["crucible_" + p] = dict(summary, streams={
                str(k): {"tokens": v["tokens"], "seconds": v["seconds"], "ttft_p50": pct(v["ttft"], 50),
                         "ttft_p99": pct(v["ttft"], 99), "itl_p50": pct(v["itl"], 50), "itl_p99": pct(v["itl"], 99)}
                for k, v in rows.items()})
    with open(os.path.join(work, "serve_bench.json"), "w") as f:
        json.dump(results, f, indent=1)
    print("results: " + os.path.join(work, "serve_bench.json"))


if __name__ == "__main__":
    main()
