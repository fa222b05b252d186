#!/usr/bin/env python3
"""What a served, traced request costs beside `glassbox run` with the same trace (issue #28).

    bench/serve_trace_cost.py --glassbox BIN --model M --tokenizer T [--tokens N] [--reps R] [--threads T] [--level basic|full]
                              [--block B]

One `glassbox serve` is started (its first request is not counted); then, in each of R rounds, B times `glassbox run --sampler greedy --trace-level L
--trace FILE -n N` and a POST /completion asking for the same (temperature 0, "trace": L, n_predict N)
B times (B = 1: strictly alternating; B = 8: a server answering requests one after another, as it does
in use, against runs one after another).
Both report the engine's own decode rate (run: the "[glassbox] ... decode X ms/token (Y tok/s)" line; serve:
glassbox.decode_tok_s), whole decode steps with the trace's work included, so process start-up and HTTP
are left out of the comparison; the served request's wall time (HTTP included) is shown beside it.
Medians over the rounds are printed, and the median of each round's serve/run ratio (of the round's
medians; the order alternates between rounds, so that the machine's drift favours neither).
"""
import argparse, json, re, statistics, subprocess, tempfile, time, urllib.request, os

ap = argparse.ArgumentParser()
ap.add_argument("--glassbox", required=True)
ap.add_argument("--model", required=True)
ap.add_argument("--tokenizer", default="")
ap.add_argument("--tokens", type=int, default=400)
ap.add_argument("--reps", type=int, default=7)
ap.add_argument("--threads", type=int, default=1)
ap.add_argument("--level", default="basic")
ap.add_argument("--prompt", default="Once upon a time")
ap.add_argument("--block", type=int, default=1,
                help="runs and requests per round, each kind back to back (1: strictly alternating; more: a server's "
                     "steady state, requests one after another, against a run's)")
a = ap.parse_args()

model = ["--model", a.model] + (["--tokenizer", a.tokenizer] if a.tokenizer else [])
tmp = tempfile.mkdtemp()
srv = subprocess.Popen([a.glassbox, "serve", *model, "--port", "0", "--threads", str(a.threads), "--trace-dir", tmp],
                       stderr=subprocess.PIPE, text=True)
port = None
for line in srv.stderr:
    m = re.search(r"listening on http://127.0.0.1:(\d+)", line)
    if m: port = int(m.group(1))
    if "ready:" in line: break
url = f"http://127.0.0.1:{port}/completion"
run_rates, serve_rates, serve_wall = [], [], []

def run_once(r):
    out = subprocess.run([a.glassbox, "run", *model, "--threads", str(a.threads), "--sampler", "greedy", "-n", str(a.tokens),
                          "--trace-level", a.level, "--trace", os.path.join(tmp, f"run{r}.jsonl"), "--prompt", a.prompt],
                         capture_output=True, text=True, errors="replace", check=True)
    run_rates.append(float(re.search(r"decode [0-9.e+]+ ms/token \(([0-9.e+]+) tok/s\)", out.stderr).group(1)))

def serve_once():
    body = json.dumps({"prompt": a.prompt, "n_predict": a.tokens, "temperature": 0, "trace": a.level}).encode()
    t0 = time.perf_counter()
    with urllib.request.urlopen(urllib.request.Request(url, body, {"Content-Type": "application/json"})) as resp:
        j = json.load(resp)
    serve_wall.append(time.perf_counter() - t0)
    serve_rates.append(j["glassbox"]["decode_tok_s"])

round_run, round_serve = [], []  # each round's median rate
try:
    serve_once()  # the server's first request (its slot's trace buffers grow), not counted
    del serve_rates[:], serve_wall[:]
    for r in range(a.reps):
        # The order alternates, so that a drift of the machine's speed within a round favours neither.
        n0, s0 = len(run_rates), len(serve_rates)
        for kind in (("run", "serve") if r % 2 == 0 else ("serve", "run")):
            for _ in range(a.block):
                run_once(r) if kind == "run" else serve_once()
        round_run.append(statistics.median(run_rates[n0:]))
        round_serve.append(statistics.median(serve_rates[s0:]))
finally:
    srv.terminate()
    srv.wait()
rm, sm = statistics.median(run_rates), statistics.median(serve_rates)
# Each round's pair as a ratio: the machine's drift between rounds cancels within a pair.
ratios = sorted(s / r for s, r in zip(round_serve, round_run))
q = statistics.quantiles(ratios, n=4) if len(ratios) > 1 else [ratios[0]] * 3
print(f"{a.tokens} tokens, trace {a.level}, {a.threads} thread(s), {a.reps} rounds of {a.block} of each, medians:")
print(f"  glassbox run --trace   decode {rm:9.1f} tok/s")
print(f"  glassbox serve         decode {sm:9.1f} tok/s  ({100 * (sm / rm - 1):+.1f}%), request wall {1000 * statistics.median(serve_wall):.1f} ms")
print(f"  serve / run, per round (of its medians): median {statistics.median(ratios):.3f}, quartiles {q[0]:.3f} .. {q[2]:.3f}")
