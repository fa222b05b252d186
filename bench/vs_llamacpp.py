#!/usr/bin/env python3
"""glassbox `bench` beside llama.cpp's `llama-bench` on the same GGUF files (issues #32, #42).

    bench/vs_llamacpp.py --llama-bench /path/to/llama-bench [--glassbox build/bin/glassbox]
                         [--rounds 3] [--threads 1,2] [-p 128] [-n 64] [--raw out.jsonl] FILE.gguf ...

    # #42's side by side: each glassbox kernel set against the llama.cpp build it should be compared with
    bench/vs_llamacpp.py --pair default::/opt/llama-native/bin/llama-bench \
                         --pair avx2:avx2:/opt/llama-avx2/bin/llama-bench --make-matrix /tmp/matrix

    # the same, building both llama.cpp builds from a source tree first (minutes)
    bench/vs_llamacpp.py --build-llamacpp ~/llama.cpp --build-root /tmp/llama-builds --make-matrix /tmp/matrix

llama.cpp is not part of this repository: build it elsewhere (docs/performance.md, "Side by side with
llama.cpp (round three)", says how), or let --build-llamacpp SRC configure and build its llama-bench twice
under --build-root: `native` (-DGGML_NATIVE=ON: every extension of this CPU) and `avx2` (-DGGML_NATIVE=OFF,
AVX2/FMA/F16C, no AVX-512: what every x86-64 CPU of the last decade without AVX-512 runs).

A pair LABEL:SET:LLAMA_BENCH runs glassbox with GLASSBOX_KERNELS=SET (empty: the set glassbox picks) against
that llama-bench; without --pair, one pair `default` against --llama-bench (and `avx2` against
--llama-bench-avx2 when given). --make-matrix DIR writes the files of the matrix into DIR once (glassbox
synth's seeded shapes with --tokenizer's vocabulary, then glassbox convert, which follows llama-quantize's type rules) and adds them to
the files benched: --presets stories15M,stories110M,tinyllama × --types F32,Q8_0,Q4_0,Q4_K_M,IQ4_NL (F32
for stories15M only: the larger F32 files add minutes and no kernel the 15M one lacks; --all-f32 keeps them).

For every round, pair, file and thread count the two engines run one after the other, each with one repeat
of a ppP and a tgN test (both warm up first), and the engine that goes first alternates between rounds, so
that a neighbour's load falls on both. The output begins with the machine (CPU model, the extensions that
decide the kernels, cores), each pair's kernel set as glassbox names it and llama.cpp's build info, and
ends with the load average's range over the measurements; the table (Markdown) has the median over the
rounds of each engine's tok/s and the ratio glassbox ÷ llama.cpp of the medians; the range over the rounds
is in brackets. --raw writes one JSON line per measurement (with the load average when it ran); --table
RAW.jsonl ... prints the table of such files again (every round in them pooled), without running anything.

Not run by the tests: it needs llama-bench and takes minutes (the whole matrix with two pairs: an hour or
more on two cores).
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time


def cpu_summary():
    """The CPU model, the extensions that pick kernel sets, and the cores, from /proc/cpuinfo."""
    model, flags = "unknown CPU", set()
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                k, _, v = line.partition(":")
                k = k.strip()
                if k in ("model name", "Model") and model == "unknown CPU":
                    model = v.strip()
                elif k in ("flags", "Features") and not flags:
                    flags = set(v.split())
    except OSError:
        pass
    wanted = ["avx2", "fma", "f16c", "avx512f", "avx512bw", "avx512vl", "avx512_vnni", "avx_vnni", "asimddp", "i8mm"]
    have = [f for f in wanted if f in flags]
    return f"{model}; {', '.join(have) or 'none of ' + '/'.join(wanted[:3])}; {os.cpu_count()} cores"


def build_llamacpp(src, root):
    """Configures and builds llama-bench twice under root: native and AVX2-only. Returns the two paths."""
    flavours = {"native": ["-DGGML_NATIVE=ON"],
                "avx2": ["-DGGML_NATIVE=OFF", "-DGGML_AVX=ON", "-DGGML_AVX2=ON", "-DGGML_FMA=ON", "-DGGML_F16C=ON",
                         "-DGGML_AVX512=OFF", "-DGGML_AVX512_VNNI=OFF", "-DGGML_AVX_VNNI=OFF"]}
    out = {}
    for name, flags in flavours.items():
        b = os.path.join(root, name)
        exe = os.path.join(b, "bin", "llama-bench")
        if not os.path.exists(exe):
            subprocess.run(["cmake", "-S", src, "-B", b, "-DCMAKE_BUILD_TYPE=Release", "-DLLAMA_CURL=OFF",
                            "-DBUILD_SHARED_LIBS=ON"] + flags, check=True, stdout=sys.stderr)
            subprocess.run(["cmake", "--build", b, "-j", str(os.cpu_count() or 2), "--target", "llama-bench"],
                           check=True, stdout=sys.stderr)
        out[name] = exe
    return out


def make_matrix(gb, folder, presets, types, all_f32, tokenizer):
    """The matrix's GGUF files in folder (made once: synth, then convert). Returns their paths."""
    os.makedirs(folder, exist_ok=True)
    files = []
    for preset in presets:
        ckpt = os.path.join(folder, f"{preset}.bin")
        if not os.path.exists(ckpt):
            subprocess.run([gb, "synth", "--preset", preset, "-o", ckpt], check=True, stdout=sys.stderr)
        for t in types:
            if t == "F32" and preset != "stories15M" and not all_f32:
                continue
            f = os.path.join(folder, f"{preset}-{t.lower()}.gguf")
            if not os.path.exists(f):
                subprocess.run([gb, "convert", "-m", ckpt, "-t", tokenizer, "-o", f, "--type", t], check=True, stdout=sys.stderr)
            files.append(f)
    return files


def run_glassbox(gb, model, threads, p, n, kernels=""):
    cmd = [gb, "bench", "-m", model, "-p", str(p), "-n", str(n), "-r", "1", "--threads", str(threads),
           "--no-roofline", "--json"]
    env = dict(os.environ)
    if kernels:
        env["GLASSBOX_KERNELS"] = kernels
    out = subprocess.run(cmd, check=True, capture_output=True, text=True, env=env).stdout
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
        info = {k: row[k] for k in ("build_commit", "cpu_info", "backends") if k in row}
    return res, {"llamacpp": info}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--llama-bench", help="llama.cpp's llama-bench: the `default` pair's")
    ap.add_argument("--llama-bench-avx2", help="an AVX2-only build's llama-bench: adds the pair avx2:avx2:PATH")
    ap.add_argument("--pair", action="append", default=[], metavar="LABEL:SET:LLAMA_BENCH",
                    help="glassbox with GLASSBOX_KERNELS=SET (empty: its own pick) against this llama-bench (repeatable)")
    ap.add_argument("--build-llamacpp", metavar="SRC", help="build llama-bench native and AVX2-only from this source tree")
    ap.add_argument("--build-root", default="llama-builds", help="where --build-llamacpp builds (default: ./llama-builds)")
    ap.add_argument("--glassbox", default=os.path.join(os.path.dirname(__file__), "..", "build", "bin", "glassbox"))
    ap.add_argument("--make-matrix", metavar="DIR", help="write the matrix's files into DIR (once) and bench them too")
    ap.add_argument("--presets", default="stories15M,stories110M,tinyllama")
    ap.add_argument("--types", default="F32,Q8_0,Q4_0,Q4_K_M,IQ4_NL")
    ap.add_argument("--tokenizer", default=os.path.join(os.path.dirname(__file__), "..", "..", "shared", "models", "tokenizer.bin"),
                    help="llama2.c's 32,000-token tokenizer.bin, embedded in the matrix's files (default: ../shared/models/tokenizer.bin)")
    ap.add_argument("--all-f32", action="store_true", help="F32 files of every preset, not only stories15M's")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("-p", type=int, default=128)
    ap.add_argument("-n", type=int, default=64)
    ap.add_argument("--raw", help="append one JSON line per measurement to this file")
    ap.add_argument("--table", action="store_true", help="the positional files are --raw outputs: print their table")
    ap.add_argument("models", nargs="*")
    a = ap.parse_args()
    if a.table:
        return print_table_from_raw(a.models)
    pairs = []  # (label, kernel set, llama-bench)
    for spec in a.pair:
        label, sep1, rest = spec.partition(":")
        kset, sep2, lb = rest.partition(":")
        if not (sep1 and sep2 and label and lb):
            ap.error(f"--pair {spec}: expected LABEL:SET:LLAMA_BENCH (SET may be empty)")
        pairs.append((label, kset, lb))
    if a.build_llamacpp:
        built = build_llamacpp(a.build_llamacpp, a.build_root)
        pairs += [("default", "", built["native"]), ("avx2", "avx2", built["avx2"])]
    if a.llama_bench:
        pairs.append(("default", "", a.llama_bench))
    if a.llama_bench_avx2:
        pairs.append(("avx2", "avx2", a.llama_bench_avx2))
    if not pairs:
        ap.error("no llama-bench: give --llama-bench, --pair or --build-llamacpp")
    for _, _, lb in pairs:
        if not os.access(lb, os.X_OK):
            ap.error(f"{lb}: not an executable llama-bench")
    models = list(a.models)
    if a.make_matrix:
        if not os.path.exists(a.tokenizer):
            ap.error(f"--tokenizer {a.tokenizer}: no such file (llama2.c's tokenizer.bin, for the matrix's files)")
        models += make_matrix(a.glassbox, a.make_matrix, a.presets.split(","), a.types.split(","), a.all_f32, a.tokenizer)
    if not models:
        ap.error("no GGUF file: name some, or give --make-matrix DIR")
    threads = [int(t) for t in a.threads.split(",")]
    rates = {}  # (pair, model, threads, test, engine) -> [tok/s per round]
    about = {}  # pair -> {"glassbox": kernel set, "llama.cpp": build info}
    loads = []
    raw = open(a.raw, "a") if a.raw else None
    for r in range(a.rounds):
        order = ["glassbox", "llama.cpp"] if r % 2 == 0 else ["llama.cpp", "glassbox"]
        for m in models:
            for t in threads:
                for label, kset, lb in pairs:
                    engines = {"glassbox": lambda: run_glassbox(a.glassbox, m, t, a.p, a.n, kset),
                               "llama.cpp": lambda: run_llamacpp(lb, m, t, a.p, a.n)}
                    for e in order:
                        load = os.getloadavg()[0]
                        loads.append(load)
                        t0 = time.time()
                        res, extra = engines[e]()
                        about.setdefault(label, {})[e] = extra.get("kernels") or extra.get("llamacpp")
                        for kind, v in res.items():
                            rates.setdefault((label, m, t, kind, e), []).append(v["tok_s"])
                            line = {"round": r, "pair": label, "engine": e, "model": os.path.basename(m), "threads": t,
                                    "test": f"{kind}{a.p if kind == 'pp' else a.n}", "load1": load,
                                    "wall_s": round(time.time() - t0, 2), **v, **extra}
                            print(json.dumps(line), file=sys.stderr, flush=True)
                            if raw:
                                print(json.dumps(line), file=raw, flush=True)
    print(f"Machine: {cpu_summary()}")
    for label, kset, lb in pairs:
        info = about.get(label, {})
        ll = info.get("llama.cpp") or {}
        print(f"Pair {label}: glassbox kernels {info.get('glassbox') or '?'}"
              f"{' (GLASSBOX_KERNELS=' + kset + ')' if kset else ''}; llama.cpp {lb}"
              f" (commit {ll.get('build_commit', '?')}, backends {ll.get('backends', '?')})")
    if loads:
        print(f"Load average (1 min) over the measurements: {min(loads):.2f}–{max(loads):.2f}")
    print()
    print_table({(label, os.path.basename(m), t, f"{kind}{a.p if kind == 'pp' else a.n}", e): v
                 for (label, m, t, kind, e), v in rates.items()})


def print_table(rates):
    """rates: (pair, file, threads, test, engine) -> [tok/s per round], in the order to print."""
    print("| pair | file | threads | test | glassbox tok/s | llama.cpp tok/s | glassbox ÷ llama.cpp |")
    print("|---|---|---:|---|---:|---:|---:|")
    files = list(dict.fromkeys(m for _, m, _, _, _ in rates))
    pairs = list(dict.fromkeys(p for p, _, _, _, _ in rates))
    keys = sorted({(p, m, t, test) for (p, m, t, test, _) in rates},
                  key=lambda k: (pairs.index(k[0]), files.index(k[1]), k[3][:2], k[2]))
    for p, m, t, test in keys:
        g, l = rates.get((p, m, t, test, "glassbox"), []), rates.get((p, m, t, test, "llama.cpp"), [])
        if not g or not l:
            continue
        mg, ml = statistics.median(g), statistics.median(l)
        print(f"| {p} | {m} | {t} | {test} | {mg:,.1f} [{min(g):,.1f}–{max(g):,.1f}] | "
              f"{ml:,.1f} [{min(l):,.1f}–{max(l):,.1f}] | {mg / ml:.2f}× |")


def print_table_from_raw(files):
    rates = {}
    for f in files:
        with open(f) as fh:
            for line in fh:
                j = json.loads(line)
                key = (j.get("pair", "default"), j["model"], j["threads"], j["test"], j["engine"])
                rates.setdefault(key, []).append(j["tok_s"])
    print_table(rates)


if __name__ == "__main__":
    main()
