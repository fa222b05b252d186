#!/usr/bin/env python3
"""Continuous batching in `glassbox serve` (issue #41): aggregate decode throughput of C concurrent requests.

    bench/serve_batch.py --glassbox BIN --model M [--tokenizer T] [--parallel 8] [--clients 8] [--tokens 64]
                         [--threads 2] [--rounds 3]

Two servers are started in turn, `--parallel P` with continuous batching (the default) and `--parallel P --no-batch`
(each slot decoding on its own, as before round four); each gets a warm-up round, then R rounds in which C clients
POST /completion at once (seeded, n_predict N, ignore_eos so that every request decodes N tokens). Reported per
server: the median over the rounds of C·N ÷ the round's wall time (aggregate tokens/s, HTTP and prefill included),
and one request alone (C = 1) for reference. The same seeds give the same texts on both (checked).
"""
import argparse, json, statistics, threading, time, urllib.request, sys
from serve_common import start_serve

ap = argparse.ArgumentParser()
ap.add_argument("--glassbox", required=True)
ap.add_argument("--model", required=True)
ap.add_argument("--tokenizer", default="")
ap.add_argument("--parallel", type=int, default=8)
ap.add_argument("--clients", type=int, default=8)
ap.add_argument("--tokens", type=int, default=64)
ap.add_argument("--threads", type=int, default=2)
ap.add_argument("--rounds", type=int, default=3)
a = ap.parse_args()

PROMPTS = ["Once upon a time", "The little bird", "Lily wanted to", "One day", "Tom and his dog", "The sun was", "A big red ball",
           "In the park"]


def start(batch):
    cmd = [a.glassbox, "serve", "--model", a.model, "--port", "0", "--threads", str(a.threads), "--parallel", str(a.parallel)]
    if a.tokenizer:
        cmd += ["--tokenizer", a.tokenizer]
    if not batch:
        cmd.append("--no-batch")
    return start_serve(cmd)


def post(port, i, out):
    body = json.dumps({"prompt": PROMPTS[i % len(PROMPTS)], "n_predict": a.tokens, "seed": 100 + i, "ignore_eos": True}).encode()
    req = urllib.request.Request(f"http://127.0.0.1:{port}/completion", body, {"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=600) as r:
        out[i] = json.loads(r.read())


def round_(port, clients):
    out = [None] * clients
    t0 = time.perf_counter()
    ts = [threading.Thread(target=post, args=(port, i, out)) for i in range(clients)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    sec = time.perf_counter() - t0
    return sum(o["tokens_predicted"] for o in out) / sec, [o["content"] for o in out]


results, texts = {}, {}
for batch in (True, False):
    p, port = start(batch)
    try:
        round_(port, a.clients)  # warm-up
        one = statistics.median(round_(port, 1)[0] for _ in range(a.rounds))
        many = []
        for _ in range(a.rounds):
            tps, txt = round_(port, a.clients)
            many.append(tps)
            texts[batch] = txt
        results[batch] = (one, statistics.median(many))
    finally:
        p.terminate()
        p.wait()
print(f"model {a.model}, --parallel {a.parallel}, {a.clients} clients × {a.tokens} tokens, --threads {a.threads}, median of {a.rounds}")
for batch in (True, False):
    one, many = results[batch]
    print(f"  {'batched   ' if batch else '--no-batch'}: 1 request {one:7.1f} tok/s   {a.clients} at once {many:7.1f} tok/s (×{many / one:.2f})")
print(f"  batched / --no-batch at {a.clients} clients: ×{results[True][1] / results[False][1]:.2f}")
print(f"  same texts: {texts[True] == texts[False]}")
sys.exit(0 if texts[True] == texts[False] else 1)
