#!/usr/bin/env python3
"""`glassbox serve` (continuous batching) beside llama.cpp's `llama-server -np N` on the same GGUF file.

    bench/serve_vs_llamacpp.py --glassbox build/bin/glassbox --llama-server /path/to/llama-server --model M.gguf
                               [--clients 1,4,8,16] [--parallel 16] [--context 512] [--threads 2]
                               [--tokens 64] [--rounds 3] [--no-nobatch] [--omp-wait-policy passive]
                               [--raw out.jsonl]

Servers, each started alone (never two at once) on a free loopback port:
  glassbox  `glassbox serve --model M --parallel P --threads T --context CTX --prefix-cache 0`
  nobatch   the same with `--no-batch` (each slot its own forward pass, for reference)
  llama     `llama-server -m M -np P -c P*CTX -t T --cont-batching` (llama.cpp gives each slot c/np positions)
For every client count C, the servers run back to back (the order rotates with C, so a neighbour's load falls on
all of them): start, one warm-up round, then R rounds in which C clients each POST /completion once at the same
moment with a distinct short story prompt, n_predict N, seed i, ignore_eos, temperature 0 (greedy on both),
cache_prompt false (llama.cpp; glassbox runs with --prefix-cache 0 for the same effect). Every answer must carry
N generated tokens (`tokens_predicted`, both servers). Reported: the median over the rounds of C*N / round wall
time (aggregate generated tok/s, HTTP and prefill included), the range in brackets, and glassbox / llama-server.
The load average (`/proc/loadavg`) is recorded before each server's rounds. On a busy machine pass
--omp-wait-policy passive: llama.cpp's OpenMP threads otherwise spin at every barrier and, preempted by the
neighbours, its rate collapses (7-100 tok/s instead of 100-300 on 2 shared cores, docs/performance.md).

llama.cpp is not part of this repository: build its server elsewhere (docs/performance.md, "Side by side:
glassbox serve and llama-server"). Not run by the tests.
"""
import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request

PROMPTS = ["Once upon a time", "The little bird", "Lily wanted to", "One day, a boy named Tom",
           "Tom and his dog", "The sun was", "A big red ball", "In the park, there was",
           "Sam had a toy car", "The old cat", "Mia found a shell", "It was a rainy day",
           "Ben liked to jump", "The tiny fish", "Anna and her mom", "Far away, in a small town"]


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def loadavg():
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


def command(a, kind, port):
    if kind == "llama":
        return [a.llama_server, "-m", a.model, "--port", str(port), "--host", "127.0.0.1", "-np", str(a.parallel),
                "-c", str(a.parallel * a.context), "-t", str(a.threads), "--cont-batching"]
    cmd = [a.glassbox, "serve", "--model", a.model, "--port", str(port), "--parallel", str(a.parallel),
           "--threads", str(a.threads), "--context", str(a.context), "--prefix-cache", "0"]
    if kind == "nobatch":
        cmd.append("--no-batch")
    return cmd


def post(url, body, timeout=600):
    req = urllib.request.Request(url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=timeout) as r:
        return json.loads(r.read())


def start(a, kind):
    port = free_port()
    cmd = command(a, kind, port)
    log = open(os.devnull, "w") if not a.server_log else open(f"{a.server_log}.{kind}.log", "a")
    env = dict(os.environ)
    if kind == "llama" and a.omp_wait_policy:
        env["OMP_WAIT_POLICY"] = a.omp_wait_policy
    p = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env)
    url = f"http://127.0.0.1:{port}"
    deadline = time.time() + 120
    while time.time() < deadline:
        if p.poll() is not None:
            sys.exit(f"{kind} exited with {p.returncode} before it was ready: {' '.join(cmd)}")
        try:
            with urllib.request.urlopen(url + "/health", timeout=5) as r:
                if r.status == 200:
                    return p, url, cmd
        except (urllib.error.URLError, ConnectionError, OSError):
            pass
        time.sleep(0.2)
    p.kill()
    sys.exit(f"{kind} not ready after 120 s")


def stop(p):
    p.terminate()
    try:
        p.wait(30)
    except subprocess.TimeoutExpired:
        p.kill()
        p.wait()


def one_round(a, kind, url, c):
    results, errors = [None] * c, []
    barrier = threading.Barrier(c + 1)

    def client(i):
        body = {"prompt": PROMPTS[i % len(PROMPTS)], "n_predict": a.tokens, "seed": i, "ignore_eos": True,
                "temperature": 0}
        if kind == "llama":
            body["cache_prompt"] = False
        barrier.wait()
        try:
            results[i] = post(url + "/completion", body)
        except Exception as e:  # noqa: BLE001 -- reported below
            errors.append(f"client {i}: {e}")

    threads = [threading.Thread(target=client, args=(i,)) for i in range(c)]
    for t in threads:
        t.start()
    barrier.wait()
    t0 = time.perf_counter()
    for t in threads:
        t.join()
    wall = time.perf_counter() - t0
    if errors:
        sys.exit(f"{kind}, C={c}: " + "; ".join(errors))
    for i, r in enumerate(results):
        n = r.get("tokens_predicted")
        if n != a.tokens:
            sys.exit(f"{kind}, C={c}, client {i}: tokens_predicted {n}, not {a.tokens}")
    return wall, results


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--glassbox", required=True)
    ap.add_argument("--llama-server", required=True)
    ap.add_argument("--model", required=True)
    ap.add_argument("--clients", default="1,4,8,16")
    ap.add_argument("--parallel", type=int, default=16)
    ap.add_argument("--context", type=int, default=512, help="positions per slot, both servers")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--tokens", type=int, default=64)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--no-nobatch", action="store_true", help="leave out glassbox --no-batch")
    ap.add_argument("--omp-wait-policy", default="",
                    help="OMP_WAIT_POLICY for llama-server (its OpenMP build spins at barriers: on a busy machine "
                         "'passive' keeps it from collapsing; default: the environment's)")
    ap.add_argument("--raw", default="", help="append one JSON line per round to this file")
    ap.add_argument("--server-log", default="", help="keep each server's output in PREFIX.KIND.log")
    a = ap.parse_args()

    kinds = ["glassbox", "llama"] + ([] if a.no_nobatch else ["nobatch"])
    clients = [int(x) for x in a.clients.split(",")]
    rates = {}   # (kind, C) -> [tok/s per round]
    loads = {}   # (kind, C) -> load average before the rounds
    texts = {}   # (kind, C) -> contents of the last round (greedy: the same every round)
    cmds = {}
    raw = open(a.raw, "a") if a.raw else None
    for ci, c in enumerate(clients):
        order = kinds[ci % len(kinds):] + kinds[:ci % len(kinds)]
        for kind in order:
            p, url, cmd = start(a, kind)
            cmds[kind] = cmd
            try:
                one_round(a, kind, url, c)  # warm-up
                loads[(kind, c)] = loadavg()
                for r in range(a.rounds):
                    wall, res = one_round(a, kind, url, c)
                    rate = c * a.tokens / wall
                    rates.setdefault((kind, c), []).append(rate)
                    texts[(kind, c)] = [x.get("content", "") for x in res]
                    line = {"server": kind, "clients": c, "round": r, "wall_s": round(wall, 4),
                            "tok_s": round(rate, 2), "load": loads[(kind, c)], "model": a.model}
                    if raw:
                        raw.write(json.dumps(line) + "\n")
                        raw.flush()
                    print(json.dumps(line), file=sys.stderr, flush=True)
            finally:
                stop(p)

    for kind in kinds:
        env = f"OMP_WAIT_POLICY={a.omp_wait_policy} " if kind == "llama" and a.omp_wait_policy else ""
        print(f"# {kind}: {env}{' '.join(cmds[kind])}")
    same = sum(texts[("glassbox", c)] == texts[("llama", c)] for c in clients)
    print(f"# greedy texts equal to llama-server's at {same} of {len(clients)} client counts")
    head = "| C | glassbox batched | glassbox `--no-batch` | llama-server | glassbox ÷ llama-server | load (gb / llama) |"
    if a.no_nobatch:
        head = head.replace(" glassbox `--no-batch` |", "")
    print(head)
    print("|" + "---:|" * (head.count("|") - 1))

    def cell(kind, c):
        v = rates[(kind, c)]
        return f"{statistics.median(v):.1f} ({min(v):.1f}–{max(v):.1f})"

    for c in clients:
        row = [str(c), cell("glassbox", c)]
        if not a.no_nobatch:
            row.append(cell("nobatch", c))
        row += [cell("llama", c),
                f"{statistics.median(rates[('glassbox', c)]) / statistics.median(rates[('llama', c)]):.2f}×",
                f"{loads[('glassbox', c)]} / {loads[('llama', c)]}"]
        print("| " + " | ".join(row) + " |")


if __name__ == "__main__":
    main()
