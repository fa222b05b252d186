#!/usr/bin/env bash
# The WebAssembly build under node (issue #43, docs/web.md) against the native binary: the same tokens for
# greedy and seeded sampling on the embedded toy, stories260K (llama2.c), a Q4_K_M GGUF and gemma3's GGUF;
# a full trace from the web build that the native `trace diff --profile f32` finds equal to the native one;
# tokenize, explain, inspect and trace validate; the errors of what the web build leaves out; and the kernel
# tests (tests/test_kernels.cpp, built as bin/test-kernels.js): the simd128 set against the scalar twins.
# Usage: tests/web/test-web-node.sh [BUILD_WEB_DIR [NATIVE_GLASSBOX]]
#   defaults: build-web/ and build/bin/glassbox in the repository; reference data from GLASSBOX_TEST_DATA or ../shared.
# Exits 0 with "SKIP: reason" when the web build, the native binary, node or the data are absent.
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
WEB=$(cd "${1:-$ROOT/build-web}" 2>/dev/null && pwd || true)
NATIVE=${2:-$ROOT/build/bin/glassbox}
DATA=${GLASSBOX_TEST_DATA:-$ROOT/../shared}
skip() { echo "SKIP: $*"; exit 0; }
[ -n "$WEB" ] && [ -f "$WEB/glassbox.mjs" ] && [ -f "$WEB/bin/glassbox-node.wasm" ] || skip "no web build (${1:-build-web}/glassbox.mjs): run tools/build-web.sh"
[ -x "$NATIVE" ] || skip "no native glassbox at $NATIVE to compare with"
command -v node >/dev/null || skip "no node"
[ -f "$DATA/models/stories260K.bin" ] || skip "no reference data at $DATA (set GLASSBOX_TEST_DATA)"

TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
cd "$TMP"  # (a relative path such as 'toy' must not name a file by chance)
fails=0 checks=0
web() { node "$WEB/glassbox.mjs" "$@"; }
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
pass() { echo "ok:   $*"; }

# same NAME ARGS...: stdout and exit status of the web build equal the native binary's (stderr differs:
# timings), and the run succeeded.
same() {
  local name=$1; shift
  checks=$((checks + 1))
  "$NATIVE" "$@" >native.out 2>native.err; local rn=$?
  web "$@" >web.out 2>web.err; local rw=$?
  if [ $rn -ne 0 ]; then fail "$name: native exit $rn: $(head -c 300 native.err)"; return; fi
  if [ $rw -ne 0 ]; then fail "$name: web exit $rw: $(head -c 300 web.err)"; return; fi
  if ! cmp -s native.out web.out; then
    fail "$name: stdout differs"; diff native.out web.out | head -10; return
  fi
  pass "$name ($(wc -c <web.out) bytes of stdout equal)"
}

# The kernel tests under node: every kernel set of the web build (simd128, scalar) against the scalar twins.
checks=$((checks + 1))
if [ -f "$WEB/bin/test-kernels.js" ]; then
  if GLASSBOX_TEST_DATA=$DATA node "$WEB/bin/test-kernels.js" >kernels.out 2>&1; then
    pass "kernel tests under node ($(grep -o 'No errors detected' kernels.out || tail -1 kernels.out))"
  else
    fail "kernel tests under node: $(grep -m5 'error' kernels.out)"; tail -5 kernels.out
  fi
else
  fail "no $WEB/bin/test-kernels.js (tools/build-web.sh builds it)"
fi

M=$DATA/models
G=$DATA/gguf
P="The weather today is"
same "toy greedy" run --prompt "$P" -n 8 --sampler greedy
grep -q " sunny" web.out || fail "toy greedy: no ' sunny' in '$(cat web.out)'"
same "toy seeded" run --prompt "$P" -n 24 --sampler top-k:40,temperature:1.5 --seed 1234
same "stories260K greedy" run --model "$M/stories260K.bin" --tokenizer "$M/tok512.bin" --prompt "Once upon a time" -n 48 --sampler greedy
same "stories260K seeded" run --model "$M/stories260K.bin" --tokenizer "$M/tok512.bin" --prompt "Once upon a time" -n 48 \
  --sampler top-k:40,top-p:0.9,temperature:0.9 --seed 42
for f in "$G/synth256-q4_k_m.gguf" "$G/synth128-q4_k_m.gguf" "$G/arch/gemma3-synth-f32.gguf" "$G/arch/gpt2-synth-f32.gguf" \
         "$G/arch/qwen2-synth-f32.gguf"; do
  if [ -f "$f" ]; then
    same "$(basename "$f") greedy" run --model "$f" --prompt "Once upon a time" -n 24 --sampler greedy
    same "$(basename "$f") seeded" run --model "$f" --prompt "Once upon a time" -n 24 --sampler temperature:1.0 --seed 7
  else
    echo "skip: $f absent"
  fi
done

# A full trace (every logit, base64) from each; the native diff with the f32 profile finds them equal.
checks=$((checks + 1))
args=(run --model "$M/stories260K.bin" --tokenizer "$M/tok512.bin" --prompt "Once upon a time" -n 32
      --sampler top-k:40,temperature:0.8 --seed 99 --trace-level full)
if "$NATIVE" "${args[@]}" --trace native.jsonl >/dev/null 2>native.err && web "${args[@]}" --trace web.jsonl >/dev/null 2>web.err; then
  if "$NATIVE" trace diff --profile f32 native.jsonl web.jsonl >diff.out 2>&1; then
    pass "full trace: native trace diff --profile f32 finds the web trace equal ($(wc -l <web.jsonl) lines)"
  else
    fail "full trace: trace diff: $(head -c 600 diff.out)"
  fi
else
  fail "full trace runs: $(head -c 300 native.err) $(head -c 300 web.err)"
fi
checks=$((checks + 1))
if "$NATIVE" trace validate web.jsonl >/dev/null 2>val.err && web trace validate native.jsonl >/dev/null 2>>val.err; then
  pass "trace validate: native accepts the web trace, web accepts the native one"
else
  fail "trace validate: $(head -c 400 val.err)"
fi
same "trace validate (web trace)" trace validate web.jsonl

# A trace into a stream (web/node-env.js): `--trace /dev/stderr` with stderr a pipe is written in place, line by
# line, as natively (NODERAWFS wrote it at a file position: "Invalid seek").
checks=$((checks + 1))
targs=(run --model "$M/stories260K.bin" --tokenizer "$M/tok512.bin" --prompt "Once upon a time" -n 4 --sampler greedy)
( web "${targs[@]}" --trace /dev/stderr 2>&1 >/dev/null; echo "exit $?" ) | cat >stream.out
"$NATIVE" "${targs[@]}" --trace stream-native.jsonl >/dev/null 2>&1
grep '^{' stream.out >stream.jsonl
if [ "$(tail -1 stream.out)" = "exit 0" ] && [ -s stream.jsonl ] && [ "$(wc -l <stream.jsonl)" = "$(wc -l <stream-native.jsonl)" ] &&
   "$NATIVE" trace validate stream.jsonl >/dev/null 2>&1; then
  pass "--trace /dev/stderr into a pipe: $(wc -l <stream.jsonl) trace lines, as many as natively, valid"
else
  fail "--trace /dev/stderr into a pipe: $(tail -1 stream.out), $(wc -l <stream.jsonl) trace lines (native $(wc -l <stream-native.jsonl)): $(grep -v '^{' stream.out | head -c 300)"
fi
# Files the web build writes get the native mode, 0666 & ~umask (web/umask.cpp; emscripten's umask made them 0000).
for mask in 022 077; do
  checks=$((checks + 1))
  rm -f mode-web.jsonl mode-native.jsonl
  (umask $mask; web "${targs[@]}" --trace mode-web.jsonl >/dev/null 2>&1; "$NATIVE" "${targs[@]}" --trace mode-native.jsonl >/dev/null 2>&1)
  mw=$(stat -c %a mode-web.jsonl 2>/dev/null) mn=$(stat -c %a mode-native.jsonl 2>/dev/null)
  if [ -n "$mw" ] && [ "$mw" = "$mn" ]; then pass "umask $mask: a trace file's mode $mw, as natively"
  else fail "umask $mask: the web build's trace file has mode '${mw:-none}', the native one's '${mn:-none}'"; fi
done

same "tokenize" tokenize --tokenizer "$M/tok512.bin" "Once upon a time, there was a cat."
same "explain" explain --dist sunny=.45,cloudy=.25,warm=.15,rainy=.10,cold=.05 --sampler top-k:3,temperature:0.8 -N 1000 --seed 5
same "inspect gguf" inspect "$G/synth256-q4_k_m.gguf"

# What the web build leaves out says so (one line, non-zero exit), and so does a file that is not a model.
expect_error() {  # NAME PATTERN ARGS...
  local name=$1 pat=$2; shift 2
  checks=$((checks + 1))
  web "$@" >web.out 2>web.err; local rw=$?
  if [ $rw -ne 0 ] && grep -q "$pat" web.err; then pass "$name: exit $rw, '$(head -1 web.err | cut -c1-110)'"
  else fail "$name: exit $rw, stderr '$(head -c 300 web.err)' (expected /$pat/)"; fi
}
[ -f "$G/arch/gpt2-synth-f32.gguf" ] && same "tokenize gpt2 (bpe, ICU-free pre-tokenizer)" tokenize --model "$G/arch/gpt2-synth-f32.gguf" \
  "Hello, world! It's 2026: don't stop   now... ünïcödé 東京 123456"
printf 'not a model at all\n' >bad.gguf
expect_error "not a model" "bad.gguf" run --model bad.gguf --prompt hi -n 2
expect_error "render" "cannot render" trace render web.jsonl -o t.svg
expect_error "serve" "no HTTP server" serve --model "$M/stories260K.bin" --tokenizer "$M/tok512.bin" --port 0
expect_error "threads" "threads" run --prompt hi -n 2 --threads 4

echo "$((checks - fails))/$checks checks passed"
[ $fails -eq 0 ]
