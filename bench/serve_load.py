#!/usr/bin/env python3
"""Load on loopback for `glassbox serve` (issue #41): C clients × R requests, bounded in count and time.

    bench/serve_load.py --glassbox BIN [--model toy] [--tokenizer T] [--parallel 8] [--queue 16] [--threads 2]
                        [--clients 32] [--requests 20] [--distinct 64] [--min-predict 16] [--max-predict 32]
                        [--no-batch] [--verify-run 4] [--deadline 300] [--timeout 120] [--retries 1000]

Starts `glassbox serve --port 0` (the port read from its "listening on http://127.0.0.1:PORT" line), then:

1. Expected texts: each of the D distinct requests (prompt, seed, n_predict; ignore_eos so that every one
   decodes n_predict tokens) is sent once, alone, to the idle server (serve's seeded results are those of
   `glassbox run` with the same options: docs/serve.md, "Determinism"); the first --verify-run of them are
   also checked against `glassbox run` itself.
2. Load: C client threads each send R requests to POST /completion, one after another, at once with the
   others; request k is distinct request k mod D, streamed (SSE) or not in turn (each distinct request both
   ways). Every 200 must carry its distinct request's expected text and token count (no request mixed with
   another); a 503 (every slot busy and the --queue full: the documented refusal) is counted and the request
   retried after a backoff (50 ms doubling to 1.6 s, jittered), at most --retries times. Anything else (another status, a connection error, an `error:` event, a
   timeout) is an error.

Reported: counts by status, p50/p99/max latency of the 200s (one attempt: queue wait, prefill and decode),
aggregate tokens/s (tokens of the 200s ÷ the load's wall time), and the server's batch counters. Exit 0
when every request was answered with its expected text and nothing else went wrong; 1 on a mismatch or an
error; 2 when the global --deadline passed first (the load stops, the server is stopped, what was done is
reported). Every socket has a timeout; the script stops by itself.
"""
import argparse, atexit, http.client, json, math, random, re, signal, subprocess, sys, threading, time

ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
ap.add_argument("--glassbox", required=True)
ap.add_argument("--model", default="toy", help="model file, or toy: the embedded toy model (default)")
ap.add_argument("--tokenizer", default="")
ap.add_argument("--parallel", type=int, default=8)
ap.add_argument("--queue", type=int, default=16, help="serve's --queue: requests waiting for a slot; beyond, 503")
ap.add_argument("--threads", type=int, default=2)
ap.add_argument("--no-batch", action="store_true", help="serve with --no-batch (each slot decoding on its own)")
ap.add_argument("--clients", type=int, default=32)
ap.add_argument("--requests", type=int, default=20, help="requests per client")
ap.add_argument("--distinct", type=int, default=64, help="distinct (prompt, seed, n_predict) requests")
ap.add_argument("--min-predict", type=int, default=16)
ap.add_argument("--max-predict", type=int, default=32)
ap.add_argument("--verify-run", type=int, default=4, help="expected texts also checked against `glassbox run`")
ap.add_argument("--deadline", type=float, default=300, help="seconds for everything; past it: stop, exit 2")
ap.add_argument("--timeout", type=float, default=120, help="seconds for one request (socket timeout)")
ap.add_argument("--retries", type=int, default=1000,
                help="503s one request may get before it counts as an error (it waits 50 ms to 1.6 s before each retry)")
a = ap.parse_args()

T0 = time.monotonic()
DEADLINE = T0 + a.deadline
PROMPTS = ["The weather today is", "Write a tagline for a coffee shop:", "Once upon a time", "The little bird",
           "Lily wanted to", "One day", "Tom and his dog", "The sun was", "A big red ball", "In the park"]


def left():
    return DEADLINE - time.monotonic()


class DeadlinePassed(Exception):
    pass


# ---- the server ----
cmd = [a.glassbox, "serve", "--model", a.model, "--port", "0", "--threads", str(a.threads), "--parallel", str(a.parallel),
       "--queue", str(a.queue)]
if a.tokenizer:
    cmd += ["--tokenizer", a.tokenizer]
if a.no_batch:
    cmd.append("--no-batch")
server = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
stderr_tail, port_box, ready = [], [], threading.Event()


def drain():
    for line in server.stderr:
        stderr_tail.append(line)
        del stderr_tail[:-50]
        m = re.search(r"listening on http://127\.0\.0\.1:(\d+)", line)
        if m and not port_box:
            port_box.append(int(m.group(1)))
        if "ready" in line and port_box:
            ready.set()
    ready.set()  # the server ended


threading.Thread(target=drain, daemon=True).start()


def stop_server():
    if server.poll() is None:
        server.terminate()
        try:
            server.wait(timeout=20)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()


atexit.register(stop_server)  # whatever ends the script ends the server (SIGTERM included)
signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))


def fail(msg, code=1):
    print(f"serve_load: {msg}", file=sys.stderr)
    stop_server()
    sys.exit(code)


if not ready.wait(timeout=max(1.0, min(60.0, left()))) or server.poll() is not None or not port_box:
    fail("the server did not start:\n" + "".join(stderr_tail), 1 if left() > 0 else 2)
PORT = port_box[0]


def request(method, path, body=None, timeout=None):
    """(status, body text); raises DeadlinePassed, or OSError/http.client errors on a failed connection."""
    t = min(timeout or a.timeout, left())
    if t <= 0:
        raise DeadlinePassed()
    c = http.client.HTTPConnection("127.0.0.1", PORT, timeout=t)  # connect, every read and write bounded
    try:
        data = json.dumps(body).encode() if body is not None else None
        c.request(method, path, data, {"Content-Type": "application/json"} if data else {})
        r = c.getresponse()
        return r.status, r.read().decode("utf-8", "replace")
    finally:
        c.close()


def completion_text(body, streamed):
    """(content, tokens_predicted) of a /completion answer, streamed or not; ValueError when malformed or an error event."""
    if not streamed:
        j = json.loads(body)
        return j["content"], j["tokens_predicted"]
    text, last = "", None
    for event in body.split("\n\n"):
        if not event.strip():
            continue
        if not event.startswith("data: "):
            raise ValueError(f"stream event {event[:200]!r}")
        j = json.loads(event[6:])
        text += j["content"]
        last = j
    if last is None or not last.get("stop"):
        raise ValueError("the stream ended without its final object")
    return text, last["tokens_predicted"]


def metric(text, name):
    m = re.search(r"^glassbox:" + name + r" (\S+)$", text, re.M)
    return float(m.group(1)) if m else float("nan")


# ---- 1. the distinct requests and their texts, each alone ----
rng = random.Random(41)
distinct = [{"prompt": PROMPTS[i % len(PROMPTS)], "seed": 1000 + i, "n_predict": rng.randint(a.min_predict, a.max_predict),
             "ignore_eos": True} for i in range(a.distinct)]
expected = []
try:
    for d in distinct:
        status, body = request("POST", "/completion", d)
        if status != 200:
            fail(f"request {d} alone: status {status}: {body[:400]}")
        expected.append(completion_text(body, False))
        if expected[-1][1] != d["n_predict"]:
            fail(f"request {d} alone: {expected[-1][1]} tokens, not n_predict")
except DeadlinePassed:
    fail(f"the --deadline ({a.deadline} s) passed while computing the expected texts", 2)
alone_s = time.monotonic() - T0
for i in range(min(a.verify_run, a.distinct)):
    d = distinct[i]
    run = [a.glassbox, "run", "--threads", str(a.threads), "-n", str(d["n_predict"]), "--seed", str(d["seed"]), "--ignore-eos",
           "--prompt", d["prompt"]]
    if a.model != "toy":  # run's default is the embedded toy model
        run += ["--model", a.model]
    if a.tokenizer:
        run += ["--tokenizer", a.tokenizer]
    try:
        out = subprocess.run(run, capture_output=True, text=True, timeout=max(1.0, left()))
    except subprocess.TimeoutExpired:
        fail(f"the --deadline ({a.deadline} s) passed in `glassbox run`", 2)
    text = expected[i][0]
    if out.returncode != 0 or out.stdout != (text if text.endswith("\n") else text + "\n"):
        fail(f"request {d}: served alone {text!r}, glassbox run (rc {out.returncode}) {out.stdout!r} {out.stderr[-400:]}")

# ---- 2. the load ----
lock = threading.Lock()
counts = {"200": 0, "503": 0}
refused_requests = [0]  # requests that got at least one 503
errors, mismatches, latencies = [], [], []
tokens = 0
stop = threading.Event()


def client(c):
    global tokens
    for j in range(a.requests):
        k = c * a.requests + j
        i = k % a.distinct
        streamed = (k + k // a.distinct) % 2 == 1  # each distinct request both ways, in turn
        body = dict(distinct[i], stream=streamed)
        refused = False
        for attempt in range(a.retries + 1):
            if stop.is_set():
                return
            t = time.monotonic()
            try:
                status, text = request("POST", "/completion", body)
            except DeadlinePassed:
                stop.set()
                return
            except (OSError, http.client.HTTPException) as e:
                if left() <= 0.5:  # the socket's timeout was the deadline's
                    stop.set()
                    return
                with lock:
                    errors.append(f"client {c} request {j}: {type(e).__name__}: {e}")
                break
            sec = time.monotonic() - t
            with lock:
                counts[str(status)] = counts.get(str(status), 0) + 1
            if status == 503:
                if not refused:
                    refused = True
                    with lock:
                        refused_requests[0] += 1
                if attempt == a.retries:
                    with lock:
                        errors.append(f"client {c} request {j}: still 503 after {a.retries} retries")
                time.sleep(min(1.6, 0.05 * 2 ** attempt) * (0.5 + random.random()))  # backoff with jitter
                continue
            if status != 200:
                with lock:
                    errors.append(f"client {c} request {j}: status {status}: {text[:300]}")
                break
            try:
                got = completion_text(text, streamed)
            except (ValueError, KeyError) as e:
                with lock:
                    errors.append(f"client {c} request {j} ({'streamed' if streamed else 'whole'}): {e}: {text[-300:]}")
                break
            with lock:
                latencies.append(sec)
                tokens += got[1]
                if got != expected[i]:
                    mismatches.append(f"client {c} request {j} (distinct {i}, {'streamed' if streamed else 'whole'}): "
                                      f"got {got!r}, alone {expected[i]!r}")
            break


def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs), max(1, math.ceil(p / 100 * len(xs)))) - 1] if xs else float("nan")  # nearest rank


try:
    _, mtext0 = request("GET", "/metrics", timeout=10)
except (DeadlinePassed, OSError, http.client.HTTPException):
    mtext0 = ""
t_load = time.monotonic()
threads = [threading.Thread(target=client, args=(c,), daemon=True) for c in range(a.clients)]
for t in threads:
    t.start()
for t in threads:
    t.join(timeout=max(0.0, left()) + 1)
timed_out = any(t.is_alive() for t in threads) or stop.is_set()
stop.set()
load_s = time.monotonic() - t_load
try:
    _, mtext = request("GET", "/metrics", timeout=10)
except (DeadlinePassed, OSError, http.client.HTTPException):
    mtext = ""
stop_server()

answered = len(latencies)
total = a.clients * a.requests
# the load's own passes (the expected texts' are before it)
passes = metric(mtext, "batch_passes_total") - metric(mtext0, "batch_passes_total")
rows = metric(mtext, "batch_rows_total") - metric(mtext0, "batch_rows_total")
print(f"glassbox serve --model {a.model} --parallel {a.parallel} --queue {a.queue} --threads {a.threads}"
      f"{' --no-batch' if a.no_batch else ''}: {a.clients} clients × {a.requests} requests, {a.distinct} distinct, "
      f"n_predict {a.min_predict}..{a.max_predict}, half streamed")
print(f"  expected texts alone: {a.distinct} requests in {alone_s:.1f} s ({min(a.verify_run, a.distinct)} checked against glassbox run)")
print(f"  load: {load_s:.1f} s; answers by status {dict(sorted(counts.items()))}; 503 (every slot busy and the queue full: "
      f"the documented refusal) for {refused_requests[0]} of the {total} requests, each then retried; answered {answered}/{total}")
print(f"  latency of a 200: p50 {pct(latencies, 50) * 1000:.0f} ms, p99 {pct(latencies, 99) * 1000:.0f} ms, "
      f"max {max(latencies, default=float('nan')) * 1000:.0f} ms")
print(f"  aggregate: {tokens} tokens in {load_s:.1f} s = {tokens / load_s:.1f} tokens/s; {answered / load_s:.2f} requests/s")
if passes == passes and passes > 0:
    print(f"  server, during the load: {passes:.0f} batched passes, {rows:.0f} rows (mean batch {rows / passes:.2f})")
print(f"  mismatches {len(mismatches)}, errors {len(errors)}")
for m in (mismatches + errors)[:10]:
    print("   ", m)
if timed_out:
    print(f"serve_load: the --deadline ({a.deadline} s) passed before the load ended", file=sys.stderr)
    sys.exit(2)
sys.exit(0 if not mismatches and not errors and answered == total else 1)
