#!/usr/bin/env python3
# Time and attention work per decode step for each attention module, at lengths 16 .. context:
# runs `glassbox run` with a trace per module, then writes a Markdown table and an SVG plot
# (docs/attention.md). BOS and EOS are banned so that every run reaches the end of the context.
# Usage: bench/attention_modules.py BUILD_DIR OUT_DIR [--model M --tokenizer T] [--label L] [--length N] [--context C]
# Time per step depends on the model's shape, not its weight values, so a `glassbox synth --preset`
# checkpoint (seeded random weights) stands in for a trained model of that shape.
import argparse, json, os, subprocess, sys, tempfile

MODULES = ["recompute", "kv-cache", "paged:16", "sliding-window:64"]
COLOURS = {"recompute": "#c0392b", "kv-cache": "#1f4e9c", "paged:16": "#2f8a4c", "sliding-window:64": "#d9822b"}


def run(glassbox, module, model_args, n, trace):
    cmd = [glassbox, "run", *model_args, "--attention", module, "--sampler", "logit-bias:1=-inf;2=-inf,greedy", "--max-tokens", str(n),
           "--prompt", "", "--context-policy", "stop", "--trace", trace]
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    steps = [json.loads(l) for l in open(trace) if '"type":"step"' in l.replace(" ", "")]
    return {s["pos"]: (s["ms"], s["attention_dots"], s["kv"]["bytes"]) for s in steps if s["phase"] == "decode"}


def median_runs(glassbox, module, model_args, n, repeat):
    runs = []
    with tempfile.TemporaryDirectory() as d:
        for r in range(repeat):
            runs.append(run(glassbox, module, model_args, n, os.path.join(d, f"t{r}.jsonl")))
    out = {}
    for pos in runs[0]:
        ms = sorted(r[pos][0] for r in runs if pos in r)
        out[pos] = (ms[len(ms) // 2], runs[0][pos][1], runs[0][pos][2])
    return out


def svg_plot(data, lengths, title):
    W, H, L, B, T, R = 640, 300, 60, 40, 24, 150
    ymax = max(v[0] for d in data.values() for p, v in d.items()) or 1
    xmax = max(lengths)
    x = lambda p: L + (W - L - R) * p / xmax
    y = lambda v: H - B - (H - T - B) * v / ymax
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {W} {H}" font-family="sans-serif" font-size="11">',
             f'<text x="{L}" y="14" font-size="13">{title}</text>',
             f'<line x1="{L}" y1="{H-B}" x2="{W-R}" y2="{H-B}" stroke="#888"/><line x1="{L}" y1="{T}" x2="{L}" y2="{H-B}" stroke="#888"/>',
             f'<text x="{L-4}" y="{T+8}" text-anchor="end">{ymax:.2f} ms</text><text x="{L-4}" y="{H-B}" text-anchor="end">0</text>',
             f'<text x="{W-R}" y="{H-B+14}" text-anchor="end">position {xmax}</text><text x="{L}" y="{H-B+14}">0</text>',
             f'<text x="{(W-R+L)/2}" y="{H-6}" text-anchor="middle">sequence length (position of the decode step)</text>']
    for i, (m, d) in enumerate(data.items()):
        pts = " ".join(f"{x(p):.1f},{y(v[0]):.1f}" for p, v in sorted(d.items()))
        parts.append(f'<polyline fill="none" stroke="{COLOURS[m]}" stroke-width="1.5" points="{pts}"/>')
        parts.append(f'<rect x="{W-R+10}" y="{T+18*i}" width="12" height="10" fill="{COLOURS[m]}"/>'
                     f'<text x="{W-R+26}" y="{T+18*i+9}">{m}</text>')
    parts.append("</svg>")
    return "\n".join(parts)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("build")
    ap.add_argument("out")
    ap.add_argument("--model", default="/work/shared/models/stories260K.bin")
    ap.add_argument("--tokenizer", default="/work/shared/models/tok512.bin")
    ap.add_argument("--label", default="stories260K")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--length", type=int, default=511, help="last position to reach (the model's context - 1)")
    ap.add_argument("--context", type=int, default=0, help="cap the positions a run may use (glassbox run --context), for time")
    a = ap.parse_args()
    glassbox = os.path.join(a.build, "bin", "glassbox")
    model_args = ["--model", a.model] + (["--tokenizer", a.tokenizer] if a.tokenizer else [])
    n = a.length  # decode steps at positions 1 .. n (the prefill is BOS at 0)
    if a.context:
        model_args += ["--context", str(a.context)]
        n = min(n, a.context - 1)
    load_before = os.getloadavg()
    data = {m: median_runs(glassbox, m, model_args, n + 1, a.repeat) for m in MODULES}
    load_after = os.getloadavg()
    lengths = [l for l in (16, 32, 64, 128, 256) if l < n] + [n]
    os.makedirs(a.out, exist_ok=True)
    rows = ["| module | " + " | ".join(f"pos {l}" for l in lengths) + " |", "|---|" + "---|" * len(lengths)]
    for m, d in data.items():
        rows.append(f"| `{m}` ms/step | " + " | ".join(f"{d[l][0]:.3f}" for l in lengths if l in d) + " |")
        rows.append(f"| `{m}` q·k per step | " + " | ".join(f"{d[l][1]}" for l in lengths if l in d) + " |")
        rows.append(f"| `{m}` KV bytes | " + " | ".join(f"{d[l][2]}" for l in lengths if l in d) + " |")
    # Timings are only comparable at a known machine load: the 1-minute load average before and after.
    rows.append("")
    rows.append(f"Load average (1 min) {load_before[0]:.2f} before, {load_after[0]:.2f} after; "
                f"{os.cpu_count()} CPUs; median of {a.repeat} runs.")
    open(os.path.join(a.out, f"attention-{a.label}.md"), "w").write("\n".join(rows) + "\n")
    open(os.path.join(a.out, f"attention-{a.label}.svg"), "w").write(svg_plot(data, lengths, f"{a.label}: decode time per step"))
    print("\n".join(rows))


if __name__ == "__main__":
    main()
