#!/usr/bin/env python3
"""The client side of tests/serve/serve_cli_test.cc: real HTTP clients against a
running `crucible serve` on loopback. Each subcommand checks one behaviour and
exits 0, or prints what went wrong and exits 1.

  serve_client.py openai PORT MODEL GREEDY_IDS_JSON   (needs the `openai` package)
  serve_client.py concurrent PORT MODEL
  serve_client.py queue_full PORT MODEL
  serve_client.py disconnect PORT MODEL
  serve_client.py drain PORT MODEL PID
  serve_client.py bad_requests PORT MODEL
"""
import http.client
import json
import os
import random
import signal
import socket
import sys
import threading
import time


def fail(msg):
    print("FAIL: " + msg, flush=True)
    sys.exit(1)


def post(port, body, timeout=120):
    """POST /v1/completions; (status, headers, parsed JSON body)."""
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    raw = body if isinstance(body, (bytes, str)) else json.dumps(body)
    c.request("POST", "/v1/completions", raw, {"Content-Type": "application/json"})
    r = c.getresponse()
    data = r.read()
    c.close()
    try:
        parsed = json.loads(data)
    except ValueError:
        parsed = data.decode(errors="replace")
    return r.status, dict(r.getheaders()), parsed


def stream_events(port, body, on_open=None):
    """POST with stream=true; yields each event's parsed JSON (or "[DONE]")."""
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    c.request("POST", "/v1/completions", json.dumps(dict(body, stream=True)),
              {"Content-Type": "application/json"})
    r = c.getresponse()
    if r.status != 200:
        raise RuntimeError("status %d: %s" % (r.status, r.read()))
    buf = b""
    while True:
        chunk = r.read1(65536) if hasattr(r, "read1") else r.read(1)
        if not chunk:
            break
        buf += chunk
        while b"\n\n" in buf:
            ev, buf = buf.split(b"\n\n", 1)
            assert ev.startswith(b"data: "), ev
            payload = ev[6:].decode()
            yield "[DONE]" if payload == "[DONE]" else json.loads(payload)
    c.close()


def metrics(port):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    c.request("GET", "/metrics")
    text = c.getresponse().read().decode()
    c.close()
    out = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            name, value = line.rsplit(" ", 1)
            out[name] = float(value)
    return out


def metric(m, name, **labels):
    """Sum of the series of `name` whose labels include `labels`."""
    total = 0.0
    for key, v in m.items():
        base = key.split("{", 1)[0]
        if base != name:
            continue
        if all(('%s="%s"' % (k, val)) in key for k, val in labels.items()):
            total += v
    return total


def wait_for(cond, what, timeout=30):
    t0 = time.time()
    while time.time() - t0 < timeout:
        if cond():
            return
        time.sleep(0.02)
    fail("timed out waiting for " + what)


# --- the subcommands -------------------------------------------------------

def cmd_openai(port, model, greedy_json):
    """The official client completes and streams; greedy equals `crucible generate`."""
    import openai
    want = json.loads(greedy_json)  # {"prompt": "...", "new": [ids]}
    client = openai.OpenAI(base_url="http://127.0.0.1:%d/v1" % port, api_key="none")
    models = [m.id for m in client.models.list().data]
    if models != [model]:
        fail("models.list: %s" % models)
    n = len(want["new"])
    r = client.completions.create(model=model, prompt=want["prompt"], max_tokens=n, temperature=0,
                                  extra_body={"return_token_ids": True})
    choice = r.choices[0]
    ids = choice.model_extra.get("token_ids") if choice.model_extra else None
    if ids is None:
        ids = json.loads(r.model_dump_json())["choices"][0].get("token_ids")
    if ids != want["new"][:len(ids)] or (len(ids) < n and choice.finish_reason != "stop"):
        fail("greedy ids %s differ from crucible generate's %s" % (ids, want["new"]))
    if r.usage.completion_tokens != len(ids) or r.usage.prompt_tokens < 1:
        fail("usage %s" % r.usage)
    text = choice.text
    pieces, finish = [], None
    for ev in client.completions.create(model=model, prompt=want["prompt"], max_tokens=n,
                                        temperature=0, stream=True):
        pieces.append(ev.choices[0].text)
        finish = ev.choices[0].finish_reason or finish
    if "".join(pieces) != text:
        fail("streamed %r != completed %r" % ("".join(pieces), text))
    if finish != choice.finish_reason:
        fail("stream finish_reason %s != %s" % (finish, choice.finish_reason))
    # A bad request through the client: its BadRequestError, naming the field.
    try:
        client.completions.create(model=model, prompt="x", max_tokens=0)
        fail("max_tokens=0 accepted")
    except openai.BadRequestError as e:
        if "max_tokens" not in str(e):
            fail("the 400 does not name max_tokens: %s" % e)
    print("openai client: %d tokens, text %r; streamed in %d chunks" % (len(ids), text, len(pieces)))


def mixed_requests(model, n):
    rnd = random.Random(1234)
    words = "the of and a to in is you that it he was for on are as with his they I at be this".split()
    reqs = []
    for i in range(n):
        prompt = " ".join(rnd.choice(words) for _ in range(rnd.choice([1, 3, 12, 40, 90])))
        body = {"model": model, "prompt": prompt, "max_tokens": rnd.choice([1, 4, 16, 40, 80]),
                "return_token_ids": True}
        if i % 3 == 0:
            body.update(temperature=0.9, top_k=40, top_p=0.95, seed=1000 + i)
        else:
            body.update(temperature=0)
        reqs.append(body)
    return reqs


def cmd_concurrent(port, model):
    """32 concurrent clients, mixed lengths, get exactly a lone request's tokens."""
    reqs = mixed_requests(model, 32)
    alone = []
    for body in reqs:  # one at a time: each runs in a batch of one
        st, _, r = post(port, body)
        if st != 200:
            fail("single request: %d %s" % (st, r))
        alone.append(r["choices"][0]["token_ids"])
    results = [None] * len(reqs)
    errors = []

    def worker(i):
        try:
            if i % 2:
                ids = []
                for ev in stream_events(port, reqs[i]):
                    if ev != "[DONE]" and ev["choices"]:
                        ids += ev["choices"][0].get("token_ids", [])
                results[i] = ids
            else:
                st, _, r = post(port, reqs[i])
                results[i] = r["choices"][0]["token_ids"] if st == 200 else ("status", st, r)
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append("%d: %r" % (i, e))

    m0 = metrics(port)
    threads = [threading.Thread(target=worker, args=(i,)) for i in range(len(reqs))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        fail("clients failed: %s" % errors)
    for i, (a, b) in enumerate(zip(alone, results)):
        if a != b:
            fail("request %d: batched %s != alone %s" % (i, b, a))
    m1 = metrics(port)
    steps = metric(m1, "crucible_serve_step_sequences_count") - metric(m0, "crucible_serve_step_sequences_count")
    single = (metric(m1, "crucible_serve_step_sequences_bucket", le="1") -
              metric(m0, "crucible_serve_step_sequences_bucket", le="1"))
    if steps - single < 1:
        fail("no engine step ran more than one sequence (%d steps)" % steps)
    print("32 concurrent clients: every token equal to the lone run's; %d of %d steps batched"
          % (steps - single, steps))


def cmd_queue_full(port, model):
    """--max-batch 1 --max-queue 1: of 16 requests at once, one runs, one waits, the
    rest get 429 with Retry-After; the accepted ones complete."""
    body = {"model": model, "prompt": "a", "max_tokens": 300, "temperature": 0}
    results = [None] * 16
    go = threading.Barrier(len(results))

    def worker(i):
        go.wait()
        results[i] = post(port, body)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(len(results))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    ok = [r for r in results if r[0] == 200]
    full = [r for r in results if r[0] == 429]
    if len(ok) + len(full) != len(results) or not full or len(ok) < 2:
        fail("statuses %s" % [r[0] for r in results])
    for st, headers, r in full:
        if "Retry-After" not in headers or r["error"]["type"] != "rate_limit_error":
            fail("a 429 without Retry-After or its error type: %s %s" % (headers, r))
    for st, headers, r in ok:
        if r["choices"][0]["finish_reason"] not in ("length", "stop"):
            fail("an accepted request: %s" % r)
    if metric(metrics(port), "crucible_serve_requests_total", outcome="queue_full") != len(full):
        fail("metrics do not count the 429s")
    print("full queue: %d of 16 answered 429 with Retry-After; the %d accepted completed"
          % (len(full), len(ok)))


def cmd_disconnect(port, model):
    """A client that goes away mid-stream frees its slot at once (metrics show it)."""
    body = json.dumps({"model": model, "prompt": "the", "max_tokens": 300, "temperature": 0,
                       "stream": True, "ignore_eos": True}).encode()
    s = socket.create_connection(("127.0.0.1", port))
    s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
              b"Content-Length: %d\r\n\r\n" % len(body) + body)
    got = b""
    while got.count(b"data: ") < 1:
        chunk = s.recv(4096)
        if not chunk:
            fail("the stream ended early: %r" % got)
        got += chunk
    s.close()
    t0 = time.time()
    wait_for(lambda: metric(metrics(port), "crucible_serve_requests_total", outcome="cancelled") == 1,
             "the cancelled request in the metrics", timeout=5)
    m = metrics(port)
    freed = time.time() - t0
    if metric(m, "crucible_serve_kv_blocks_used") != 0 or metric(m, "crucible_serve_batch_size") > 1:
        fail("blocks still held after the disconnect: %s" % m)
    generated = metric(m, "crucible_serve_generated_tokens_total")
    if generated >= 300:
        fail("the engine generated all %d tokens for a client that left" % generated)
    st, _, r = post(port, {"model": model, "prompt": "the", "max_tokens": 5, "temperature": 0})
    if st != 200:
        fail("after the disconnect: %d %s" % (st, r))
    print("disconnect: slot freed %.0f ms after the client left, %d of 300 tokens generated"
          % (freed * 1000, generated))


def cmd_drain(port, model, pid):
    """SIGTERM mid-load (--max-batch 4): every request the server accepted
    completes in full; those sent after it get 503 (or a closed listener)."""
    reqs = mixed_requests(model, 8)
    for r in reqs:
        r.update(max_tokens=200, temperature=0, ignore_eos=True, prompt=r["prompt"][:200])
    results = [None] * len(reqs)

    def worker(i):
        try:
            if i % 2:
                ids = []
                finish = None
                for ev in stream_events(port, reqs[i]):
                    if ev != "[DONE]" and ev["choices"]:
                        finish = ev["choices"][0]["finish_reason"] or finish
                        ids += ev["choices"][0].get("token_ids", [])
                results[i] = (finish, len(ids))
            else:
                st, _, r = post(port, reqs[i])
                results[i] = ((r["choices"][0]["finish_reason"], len(r["choices"][0]["token_ids"]))
                              if st == 200 else st)
        except RuntimeError as e:  # the stream's status was not 200
            results[i] = 503 if "status 503" in str(e) else repr(e)
        except (ConnectionError, http.client.RemoteDisconnected):
            # No response at all: sent after the listener closed (or into its
            # backlog as it closed), never accepted. That no accepted request
            # is lost is checked against the server's count below.
            results[i] = "refused"
        except Exception as e:  # noqa: BLE001
            results[i] = repr(e)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(len(reqs))]
    for t in threads:
        t.start()
    # Mid-load: requests running and more waiting behind them.
    wait_for(lambda: metric(metrics(port), "crucible_serve_queue_depth") >= 1 and
             metric(metrics(port), "crucible_serve_generated_tokens_total") > 0, "a queued request")
    m = metrics(port)
    # Accepted and not yet finished just before the signal: a lower bound on
    # what must complete (requests admitted later complete too).
    in_flight = metric(m, "crucible_serve_queue_depth") + metric(m, "crucible_serve_batch_size")
    os.kill(pid, signal.SIGTERM)
    time.sleep(0.05)
    try:  # a new request while draining: 503 (or refused once the listener closed)
        st, headers, r = post(port, reqs[0], timeout=10)
        if st != 503 or "Retry-After" not in headers:
            fail("a request after SIGTERM: %d %s" % (st, r))
    except OSError:
        pass
    for t in threads:
        t.join()
    done = [r for r in results if isinstance(r, tuple)]
    for i, r in enumerate(results):
        if r in (503, "refused"):
            continue
        if not isinstance(r, tuple) or r != ("length", reqs[i]["max_tokens"]):
            fail("request %d after SIGTERM: %s" % (i, r))
    if len(done) < max(5, in_flight):  # 4 running and at least one queued at the signal
        fail("%d requests completed, %d were in flight at SIGTERM: %s" % (len(done), in_flight, results))
    print("drain: all %d accepted requests completed in full after SIGTERM (%d refused with 503)"
          % (len(done), len(results) - len(done)))


def cmd_bad_requests(port, model):
    """Each bad request class gets a 400 (404 for another model) naming the field."""
    cases = [
        ("{not json", None),
        ("[1, 2]", None),
        ({"model": model}, "prompt"),
        ({"model": model, "prompt": "x", "max_tokens": "8"}, "max_tokens"),
        ({"model": model, "prompt": "x", "max_tokens": 0}, "max_tokens"),
        ({"model": model, "prompt": "x", "temperature": "hot"}, "temperature"),
        ({"model": model, "prompt": "x", "temperature": 3}, "temperature"),
        ({"model": model, "prompt": "x", "top_p": 0}, "top_p"),
        ({"model": model, "prompt": "x", "top_k": 1.5}, "top_k"),
        ({"model": model, "prompt": "x", "seed": "s"}, "seed"),
        ({"model": model, "prompt": "x", "stop": 5}, "stop"),
        ({"model": model, "prompt": "x", "stream": "yes"}, "stream"),
        ({"model": model, "prompt": 7}, "prompt"),
        ({"model": model, "prompt": [1, -1]}, "prompt"),
        ({"model": model, "prompt": ["a", "b"]}, "prompt"),
        ({"model": model, "prompt": "x", "n": 2}, "n"),
        ({"model": model, "prompt": "x", "logprobs": 3}, "logprobs"),
        ({"model": model, "prompt": "x", "max_tokenz": 3}, "max_tokenz"),
        ({"model": model, "prompt": "the " * 2000}, "prompt"),
        ({"model": model, "prompt": "x", "max_tokens": 100000}, "max_tokens"),
        ({"model": "gpt-4", "prompt": "x"}, "model"),
    ]
    for body, param in cases:
        st, _, r = post(port, body)
        want = 404 if param == "model" else 400
        if st != want or not isinstance(r, dict) or "error" not in r:
            fail("%s: %d %s" % (body if isinstance(body, str) else json.dumps(body)[:80], st, r))
        if r["error"]["param"] != param:
            fail("%s: param %s, expected %s (%s)" % (str(body)[:80], r["error"]["param"], param,
                                                     r["error"]["message"]))
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    c.request("GET", "/v1/nothing")
    r = c.getresponse()
    if r.status != 404 or "error" not in json.loads(r.read()):
        fail("an unknown route: %d" % r.status)
    st, _, r = post(port, {"model": model, "prompt": "x", "max_tokens": 2})
    if st != 200:
        fail("a good request after the bad ones: %d %s" % (st, r))
    if metric(metrics(port), "crucible_serve_requests_total", outcome="bad_request") != len(cases):
        fail("metrics do not count every 400")
    print("bad requests: %d classes refused, each naming its field" % len(cases))


def main():
    cmd, port = sys.argv[1], int(sys.argv[2])
    args = sys.argv[3:]
    {"openai": lambda: cmd_openai(port, args[0], args[1]),
     "concurrent": lambda: cmd_concurrent(port, args[0]),
     "queue_full": lambda: cmd_queue_full(port, args[0]),
     "disconnect": lambda: cmd_disconnect(port, args[0]),
     "drain": lambda: cmd_drain(port, args[0], int(args[1])),
     "bad_requests": lambda: cmd_bad_requests(port, args[0])}[cmd]()


if __name__ == "__main__":
    main()
