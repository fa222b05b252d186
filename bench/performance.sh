#!/usr/bin/env bash
# The measurements behind docs/performance.md's table, in one run: synthetic stories15M/110M (F32,
# Q8_0, Q4_0) through `glassbox bench`, the cost of tracing (bench/trace_cost.py) and start-up.
#
#   bench/performance.sh [GLASSBOX] [WORKDIR]
#
# GLASSBOX defaults to build/bin/glassbox; the models are written once to WORKDIR (default
# /tmp/glassbox-bench: ~900 MB). Needs llama2.c's tokenizer.bin ($GLASSBOX_TEST_DATA or ../shared,
# models/tokenizer.bin) for the tokenizer of `run`. Prints the load average beside each part: on a
# busy machine read the `cpu ms/tok` columns, not tok/s.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
gb=${1:-$here/build/bin/glassbox}
work=${2:-/tmp/glassbox-bench}
shared=${GLASSBOX_TEST_DATA:-$here/../shared}
tok=$shared/models/tokenizer.bin
mkdir -p "$work"
[ -f "$work/s15m.bin" ] || "$gb" synth --preset stories15M -o "$work/s15m.bin"
[ -f "$work/s110.bin" ] || "$gb" synth --preset stories110M -o "$work/s110.bin"
for t in Q8_0 Q4_0; do
  f=$work/s110-${t,,}.gguf
  [ -f "$f" ] || "$gb" convert -m "$work/s110.bin" -t "$tok" --type "$t" -o "$f" >/dev/null
done
load() { echo "-- load average: $(cut -d' ' -f1-3 /proc/loadavg)"; }

echo "== stories15M F32"; load
"$gb" bench -m "$work/s15m.bin" -p 128 -n 64 -r 5 --threads 1,2
echo "== stories110M F32"; load
"$gb" bench -m "$work/s110.bin" -p 256 -n 64 -r 3 --threads 1,2 --one-by-one
for t in q8_0 q4_0; do
  echo "== stories110M ${t^^}"; load
  "$gb" bench -m "$work/s110-$t.gguf" -p 256 -n 64 -r 3 --threads 1,2 --no-roofline
done
echo "== start-up: run -n 1 --context 16 (plain, then traced: the model's digest, computed and from the digest cache)"; load
rm -rf "$work/cache"
for i in 1 2 3; do
  /usr/bin/time -f "plain  %e s wall, %U + %S s cpu, peak RSS %M KB" "$gb" run -m "$work/s110.bin" -t "$tok" -n 1 --context 16 -p Once >/dev/null 2>"$work/err" || cat "$work/err"
  tail -1 "$work/err"
  GLASSBOX_CACHE_DIR=off /usr/bin/time -f "traced %e s wall, %U + %S s cpu, peak RSS %M KB (digest computed)" "$gb" run -m "$work/s110.bin" -t "$tok" -n 1 --context 16 -p Once --trace "$work/t.jsonl" >/dev/null 2>"$work/err" || cat "$work/err"
  tail -1 "$work/err"
  GLASSBOX_CACHE_DIR="$work/cache" /usr/bin/time -f "traced %e s wall, %U + %S s cpu, peak RSS %M KB (digest cache; computed on the first round)" "$gb" run -m "$work/s110.bin" -t "$tok" -n 1 --context 16 -p Once --trace "$work/t.jsonl" >/dev/null 2>"$work/err" || cat "$work/err"
  tail -1 "$work/err"
done
echo "== load + validate (inspect), then + the digest (inspect --sha256, computed)"; load
for i in 1 2 3; do
  /usr/bin/time -f "inspect          %e s wall, %U + %S s cpu, peak RSS %M KB" "$gb" inspect "$work/s110.bin" >/dev/null
  GLASSBOX_CACHE_DIR=off /usr/bin/time -f "inspect --sha256 %e s wall, %U + %S s cpu, peak RSS %M KB" "$gb" inspect --sha256 "$work/s110.bin" >/dev/null
done
for th in 1 2; do
  echo "== cost of tracing, --threads $th"; load
  python3 "$here/bench/trace_cost.py" --glassbox "$gb" --threads "$th" --reps 9
done
load
