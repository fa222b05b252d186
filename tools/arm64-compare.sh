#!/usr/bin/env bash
# The arm64 binary (build-arm64/, under qemu-aarch64) against the x86-64 one (build/): the same text on
# stdout for greedy and seeded runs on stories260K (llama2.c) and greedy runs on the GGUF F32, Q8_0, Q4_0,
# Q4_K_M and IQ4_NL files of ../shared; full traces equal under `trace diff --profile f32`, but for
# stories260K-q4_0 under its weight type's profile (q4_0): between x86-64's own kernel sets that file already
# differs by 0.14 in a logit, past f32's 2e-4 (the activations' rounding to Q8_0 magnifies the last bit of an
# F32 sum); the scalar set's logits on both machines bit for bit; and the
# stories260K golden traces (tests/golden) and llama2.c's logits diffed against the arm64 runs as
# tests/test_golden.cpp diffs the native ones. Run by tools/cross-arm64.sh --test (docs/reliability.md).
# Each arm64 case runs under every NEON set the emulated CPU has (GLASSBOX_ARM64_SETS to choose).
# Exit 0: all equal; 1: a difference (printed); 2: a binary or the reference data is missing.
set -uo pipefail
cd "$(dirname "$0")/.."
x86=${GLASSBOX_X86_BIN:-build/bin/glassbox}
arm=build-arm64/bin/glassbox
data=${GLASSBOX_TEST_DATA:-../shared}
out=build-arm64/compare
sets=${GLASSBOX_ARM64_SETS:-neon-i8mm neon-dotprod neon}
for f in "$x86" "$arm"; do [ -x "$f" ] || { echo "arm64-compare: $f not built (tools/test.sh, tools/cross-arm64.sh)" >&2; exit 2; }; done
[ -d "$data/models" ] || { echo "arm64-compare: reference data not found ($data; GLASSBOX_TEST_DATA)" >&2; exit 2; }
mkdir -p "$out"
fail=0
stories=(--model "$data/models/stories260K.bin" --tokenizer "$data/models/tok512.bin")

# check NAME PROFILE ARGS…: one run on each side, stdout byte for byte, the traces through trace diff --profile.
check() {
  local name=$1 profile=$2; shift 2
  local popt=(--profile "$profile")
  "$x86" run "$@" --trace "$out/$name.x86.jsonl" > "$out/$name.x86.txt" 2> "$out/$name.x86.err" \
    || { echo "FAIL $name: the x86-64 run failed: $(tail -1 "$out/$name.x86.err")"; fail=1; return; }
  for set in $sets; do
    local tag=$name.$set
    if ! GLASSBOX_KERNELS=$set tools/cross-arm64.sh --run run "$@" --trace "$out/$tag.jsonl" > "$out/$tag.txt" 2> "$out/$tag.err"; then
      echo "FAIL $tag: the arm64 run failed: $(tail -1 "$out/$tag.err")"; fail=1; continue
    fi
    if ! cmp -s "$out/$name.x86.txt" "$out/$tag.txt"; then
      echo "FAIL $tag: output text differs"; diff "$out/$name.x86.txt" "$out/$tag.txt" | head -5; fail=1
    elif ! "$x86" trace diff "${popt[@]}" "$out/$name.x86.jsonl" "$out/$tag.jsonl" > "$out/$tag.diff" 2>&1; then
      echo "FAIL $tag: trace diff (profile $profile)"; grep -E "first divergent|max \|" "$out/$tag.diff" | head -4; fail=1
    else
      echo "ok   $tag: $(wc -c < "$out/$tag.txt") bytes of text, traces equal (profile $profile)"
    fi
  done
}

check toy-greedy f32 --prompt "The weather today is" --max-tokens 8 --sampler greedy --trace-level full
check stories-greedy f32 "${stories[@]}" --prompt "Once upon a time" --max-tokens 60 --sampler greedy --trace-level full
check stories-topk-seed7 f32 "${stories[@]}" --prompt "Lily and Ben went to the park" --max-tokens 48 \
  --sampler top-k:40,temperature:0.8 --seed 7 --trace-level full
check stories-nucleus-seed42 f32 "${stories[@]}" --prompt "" --max-tokens 48 \
  --sampler repetition-penalty:1.1,top-k:40,top-p:0.95,min-p:0.05,temperature:0.8 --seed 42
for f in stories260K-f32 stories260K-q8_0 stories260K-q4_0 synth256-q4_k_m synth256-iq4_nl synth128-q4_1 synth128-q5_k_m; do
  [ -f "$data/gguf/$f.gguf" ] || { echo "skip $f: $data/gguf/$f.gguf absent"; continue; }
  prof=f32; case $f in *-q4_0) prof=q4_0 ;; esac
  check "gguf-$f" "$prof" --model "$data/gguf/$f.gguf" --prompt "Once upon a time" --max-tokens 24 --sampler greedy --trace-level full
done

# The scalar set on both machines: every logit bit for bit (the same code, -ffp-contract=off on arm64).
bits() {
  local name=$1; shift
  GLASSBOX_KERNELS=scalar "$x86" run "$@" --trace-level full --trace "$out/bits-$name.x86.jsonl" > /dev/null 2>&1
  GLASSBOX_KERNELS=scalar tools/cross-arm64.sh --run run "$@" --trace-level full --trace "$out/bits-$name.arm64.jsonl" > /dev/null 2>&1
  # Only the logits (base64 of the float32 bytes): the rest holds timings and the machine's names.
  local a b
  a=$(grep -oE '"logits":("[^"]*"|\[[^]]*\])' "$out/bits-$name.x86.jsonl" | md5sum)
  b=$(grep -oE '"logits":("[^"]*"|\[[^]]*\])' "$out/bits-$name.arm64.jsonl" | md5sum)
  local steps; steps=$(grep -c '"logits":' "$out/bits-$name.x86.jsonl" || true)
  if [ "$a" = "$b" ] && [ "$steps" -gt 0 ]; then echo "ok   scalar set, $name: the logits of $steps steps bit for bit"
  else echo "FAIL scalar set, $name: logits differ between x86-64 and arm64"; fail=1; fi
}
bits stories-greedy "${stories[@]}" --prompt "Once upon a time" --max-tokens 24 --sampler greedy
bits q4_0-greedy --model "$data/gguf/stories260K-q4_0.gguf" --prompt "Once upon a time" --max-tokens 24 --sampler greedy

# The golden traces (tests/test_golden.cpp's stories260K cases, the same arguments), diffed as that test does.
golden() {
  local name=$1; shift
  local set=${sets%% *}
  GLASSBOX_KERNELS=$set tools/cross-arm64.sh --run run "${stories[@]}" "$@" --trace "$out/golden-$name.jsonl" > /dev/null 2> "$out/golden-$name.err" \
    || { echo "FAIL golden $name: the arm64 run failed"; fail=1; return; }
  if "$x86" trace diff "tests/golden/$name.jsonl" "$out/golden-$name.jsonl" > "$out/golden-$name.diff" 2>&1; then
    echo "ok   golden $name ($set)"
  else
    echo "FAIL golden $name ($set)"; head -5 "$out/golden-$name.diff"; fail=1
  fi
}
golden stories260K-greedy --prompt "Once upon a time" --max-tokens 20 --sampler greedy --seed 1 --trace-level full
golden stories260K-topk40-temp0.8-seed7 --prompt "Lily and Ben went to the park" --max-tokens 32 --sampler top-k:40,temperature:0.8 --seed 7
golden stories260K-penalty-nucleus-seed42 --prompt "" --max-tokens 32 \
  --sampler repetition-penalty:1.1,top-k:40,top-p:0.95,min-p:0.05,temperature:0.8 --seed 42
# llama2.c's own logits for the greedy run (../shared/golden), imported as the golden test does.
if "$x86" trace import "$data/golden/llama2c-stories260K-greedy.jsonl" -o "$out/llama2c.jsonl" "${stories[@]}" > /dev/null 2>&1; then
  if "$x86" trace diff "$out/llama2c.jsonl" "$out/golden-stories260K-greedy.jsonl" > "$out/llama2c.diff" 2>&1; then
    echo "ok   llama2.c logits vs the arm64 greedy run"
  else
    echo "FAIL llama2.c logits vs the arm64 greedy run"; head -5 "$out/llama2c.diff"; fail=1
  fi
fi
[ $fail -eq 0 ] && echo "arm64-compare: all equal" || echo "arm64-compare: differences above"
exit $fail
