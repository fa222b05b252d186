#!/usr/bin/env python3
"""Prefix reuse in `glassbox serve` (issue #41): a class whose requests share a long system prompt.

    bench/serve_prefix.py --glassbox BIN --model M [--tokenizer T] [--parallel 8] [--clients 8] [--tokens 16]
                          [--threads 2] [--rounds 3] [--system-words 150]

Two servers in turn, both batched (`--parallel P`): `--prefix-cache 0` (every request prefills the whole
prompt) and the default cache. In each round, C clients POST /completion at once, each prompt the same
system text (about W words of story) followed by the client's own question (seeded, n_predict N,
ignore_eos). A warm-up round first (which fills the cache: a class's system prompt is sent again and again).
Reported per server: the median over rounds of the round's wall time and of the requests' mean prefill
time (`timings.prompt_ms`), and the server's prefix-cache counters. The same seeds give the same texts with
and without the cache (checked; exit 1 otherwise).
"""
import argparse, json, re, statistics, sys, threading, time, urllib.request
from serve_common import start_serve

ap = argparse.ArgumentParser()
ap.add_argument("--glassbox", required=True)
ap.add_argument("--model", required=True)
ap.add_argument("--tokenizer", default="")
ap.add_argument("--parallel", type=int, default=8)
ap.add_argument("--clients", type=int, default=8)
ap.add_argument("--tokens", type=int, default=16)
ap.add_argument("--threads", type=int, default=2)
ap.add_argument("--rounds", type=int, default=3)
ap.add_argument("--system-words", type=int, default=150)
a = ap.parse_args()

STORY = ("Once upon a time there was a little girl named Lily who lived in a small house near the big green park "
         "with her mother her father and her dog Max who liked to run after the red ball every morning before school ").split()
SYSTEM = " ".join(STORY[i % len(STORY)] for i in range(a.system_words)) + "."
QUESTIONS = ["What did Lily do", "Where did Max go", "Who found the ball", "Why was Lily sad", "What did mother say",
             "How did the day end", "What was in the park", "Who came to play", "What did father bring", "Where was the ball",
             "What did Max find", "When did they go home", "What did Lily see", "Who was at school", "What did the dog eat",
             "How did Lily feel"]


def start(cache_mib):
    cmd = [a.glassbox, "serve", "--model", a.model, "--port", "0", "--threads", str(a.threads), "--parallel", str(a.parallel),
           "--prefix-cache", str(cache_mib)]
    if a.tokenizer:
        cmd += ["--tokenizer", a.tokenizer]
    return start_serve(cmd)


def post(port, i, out):
    prompt = SYSTEM + "\n" + QUESTIONS[i % len(QUESTIONS)] + "?"
    body = json.dumps({"prompt": prompt, "n_predict": a.tokens, "seed": 100 + i, "ignore_eos": True}).encode()
    req = urllib.request.Request(f"http://127.0.0.1:{port}/completion", body, {"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=600) as r:
        out[i] = json.loads(r.read())


def round_(port):
    out = [None] * a.clients
    t0 = time.perf_counter()
    ts = [threading.Thread(target=post, args=(port, i, out)) for i in range(a.clients)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    sec = time.perf_counter() - t0
    return sec, statistics.mean(o["timings"]["prompt_ms"] for o in out), [o["content"] for o in out], out[0]["tokens_evaluated"]


def metric(port, name):
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=30) as r:
        m = re.search(rf"^glassbox:{name} (\S+)$", r.read().decode(), re.M)
        return float(m.group(1)) if m else float("nan")


res, texts = {}, {}
for mib in (0, 256):
    p, port = start(mib)
    try:
        round_(port)  # warm-up (with the cache: fills it)
        walls, prefills = [], []
        for _ in range(a.rounds):
            sec, pre, txt, n_prompt = round_(port)
            walls.append(sec)
            prefills.append(pre)
            texts[mib] = txt
        res[mib] = (statistics.median(walls), statistics.median(prefills), n_prompt, metric(port, "prefix_cache_hits_total"),
                    metric(port, "prefix_cache_tokens_reused_total"))
    finally:
        p.terminate()
        p.wait()
print(f"model {a.model}, --parallel {a.parallel}, {a.clients} clients, prompts of {res[0][2]} tokens sharing a "
      f"{a.system_words}-word system text, {a.tokens} tokens each, --threads {a.threads}, median of {a.rounds}")
for mib in (0, 256):
    wall, pre, _, hits, reused = res[mib]
    print(f"  --prefix-cache {mib:3d}: round {wall * 1000:8.1f} ms, mean prefill {pre:7.1f} ms, "
          f"{a.clients * a.tokens / wall:7.1f} tok/s; cache hits {hits:.0f}, positions reused {reused:.0f}")
print(f"  round time without ÷ with the cache: ×{res[0][0] / res[256][0]:.2f}; prefill ×{res[0][1] / max(res[256][1], 1e-9):.2f}")
print(f"  same texts: {texts[0] == texts[256]}")
sys.exit(0 if texts[0] == texts[256] else 1)
