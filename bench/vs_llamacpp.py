#!/usr/bin/env python3
"""glassbox `bench` beside llama.cpp's `llama-bench` on the same GGUF files (issue #32).

    bench/vs_llamacpp.py --llama-bench /path/to/llama-bench [--glassbox build/bin/glassbox]
                         [--rounds 3] [--threads 1,2] [-p 128] [-n 64] [--raw out.jsonl] FILE.gguf ...

llama.cpp is not part of this repository: build it elsewhere (docs/performance.md, "Side by side with
llama.cpp (round three)", says how) and pass its llama-bench. For every round, file and thread count the
two engines run one after the other, each with one repeat of a ppP and a tgN test (both warm up first),
and the engine that goes first alternates between rounds, so that a neighbour's load falls on both.
The table printed at the end (Markdown) has the median over the rounds of each engine's tok/s and the
ratio glassbox ÷ llama.cpp of the medians; the range over the rounds is in brackets. --raw writes one
JSON line per measurement (with the load average when it ran); --table RAW.jsonl ... prints the table of
such files again (every round in them pooled), without running anything.

Not run by the tests: it needs llama-bench and takes minutes.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time


def run_glassbox(gb, model, threads, p, n):
    cmd = [gb, "bench", "-m", model, "-p", str(p), "-n", str(n), "-r", "1", "--threads", str(threads),
           "--no-roofline", "--json"]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    j = json.loads(out)
    res = {}
    for row in j["results"]:
        kind = "pp" if row["test"].startswith("pp") else "tg"
        res[kind] = {"tok_s": row["tok_s"], "cpu_ms_per_token": row.get("cpu_ms_per_token")}
    return res, {"kernels": j.get("kernels")}


def run_llamacpp(lb, model, threads, p, n):
    cmd = [lb, "-m", model, "-p", str(p), "-n", str(n), "-t", str(threads), "-r", "1", "-o", "json"]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    res = {}
    for row in json.loads(out):
        kind = "pp" if row["n_prompt"] > 0 else "tg"
        res[kind] = {"tok_s": row["avg_ts"]}
    return res, {}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--llama-bench", required=True)
    ap.add_argument("--glassbox", default=os.path.join(os.path.dirname(__file__), "..", "build", "bin", "glassbox"))
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("-p", type=int, default=128)
    ap.add_argument("-n", type=int, default=64)
    ap.add_argument("--raw", help="append one JSON line per measurement to this file")
    ap.add_argument("--table", action="store_true", help="the positional files are --raw outputs: print their table")
    ap.add_argument("models", nargs="+")
    a = ap.parse_args()
    if a.table:
        return print_table_from_raw(a.models)
    threads = [int(t) for t in a.threads.split(",")]
    engines = {"glassbox": lambda m, t: run_glassbox(a.glassbox, m, t, a.p, a.n),
               "llama.cpp": lambda m, t: run_llamacpp(a.llama_bench, m, t, a.p, a.n)}
    rates = {}  # (model, threads, test, engine) -> [tok/s per round]
    raw = open(a.raw, "a") if a.raw else None
    for r in range(a.rounds):
        order = ["glassbox", "llama.cpp"] if r % 2 == 0 else ["llama.cpp", "glassbox"]
        for m in a.models:
            for t in threads:
                for e in order:
                    load = os.getloadavg()[0]
                    t0 = time.time()
                    res, extra = engines[e](m, t)
                    for kind, v in res.items():
                        rates.setdefault((m, t, kind, e), []).append(v["tok_s"])
                        line = {"round": r, "engine": e, "model": os.path.basename(m), "threads": t,
                                "test": f"{kind}{a.p if kind == 'pp' else a.n}", "load1": load,
                                "wall_s": round(time.time() - t0, 2), **v, **extra}
                        print(json.dumps(line), file=sys.stderr, flush=True)
                        if raw:
                            print(json.dumps(line), file=raw, flush=True)
    print_table({(os.path.basename(m), t, f"{kind}{a.p if kind == 'pp' else a.n}", e): v
                 for (m, t, kind, e), v in rates.items()})


def print_table(rates):
    """rates: (file, threads, test, engine) -> [tok/s per round], in the order to print."""
    print("| file | threads | test | glassbox tok/s | llama.cpp tok/s | glassbox ÷ llama.cpp |")
    print("|---|---:|---|---:|---:|---:|")
    keys = sorted({(m, t, test) for (m, t, test, _) in rates},
                  key=lambda k: (list(dict.fromkeys(m for m, _, _, _ in rates)).index(k[0]), k[2][:2], k[1]))
    for m, t, test in keys:
        g, l = rates.get((m, t, test, "glassbox"), []), rates.get((m, t, test, "llama.cpp"), [])
        if not g or not l:
            continue
        mg, ml = statistics.median(g), statistics.median(l)
        print(f"| {m} | {t} | {test} | {mg:,.1f} [{min(g):,.1f}–{max(g):,.1f}] | "
              f"{ml:,.1f} [{min(l):,.1f}–{max(l):,.1f}] | {mg / ml:.2f}× |")


def print_table_from_raw(files):
    rates = {}
    for f in files:
        with open(f) as fh:
            for line in fh:
                j = json.loads(line)
                rates.setdefault((j["model"], j["threads"], j["test"], j["engine"]), []).append(j["tok_s"])
    print_table(rates)


if __name__ == "__main__":
    main()
