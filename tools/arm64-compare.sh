#!/usr/bin/env bash
# The arm64 binary (build-arm64/, under qemu-aarch64) against the x86-64 one (build/): the same text on
# stdout for greedy and seeded runs on stories260K (llama2.c) and greedy runs on the GGUF F32, Q8_0, Q4_0,
# Q4_K_M, IQ4_NL, Q4_1, Q5_K_M, F16, Q2_K and Q3_K_M files of ../shared; full traces equal under `trace diff
# --profile f32`, but for stories260K-q4_0/-q8_0 and the F16 file under their weight type's profile: between
# x86-64's own kernel sets those files already differ past f32's 2e-4 (0.14–0.18 in a logit: the activations'
# rounding to Q8_0 or F16 magnifies the last bit of an F32 or F16 sum); and the scalar set's logits on both
# machines bit for bit. Run by tools/cross-arm64.sh --test
# (docs/reliability.md), after the golden tests (test_golden, test_gguf_model) under qemu.
# The quantized files run under every NEON set the emulated CPU has (GLASSBOX_ARM64_SETS to choose), the F32
# and F16 ones under the first.
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

# F32 models: the NEON sets share their F32 code (dot, products, axpy), so the first set alone.
all_sets=$sets
sets=${all_sets%% *}
check toy-greedy f32 --prompt "The weather today is" --max-tokens 8 --sampler greedy --trace-level full
check stories-greedy f32 "${stories[@]}" --prompt "Once upon a time" --max-tokens 60 --sampler greedy --trace-level full
check stories-topk-seed7 f32 "${stories[@]}" --prompt "Lily and Ben went to the park" --max-tokens 48 \
  --sampler top-k:40,temperature:0.8 --seed 7 --trace-level full
check stories-nucleus-seed42 f32 "${stories[@]}" --prompt "" --max-tokens 48 \
  --sampler repetition-penalty:1.1,top-k:40,top-p:0.95,min-p:0.05,temperature:0.8 --seed 42
# Each file under f32's profile, but where x86-64's own kernel sets already differ past it: stories260K-q4_0
# (q4_0), stories260K-q8_0 (q8_0: its ffn_down is F16, and x86's sse4.2 and scalar sets differ there by 0.18
# in a logit, the F16 dot's last bits magnified by the next layer's rounding to Q8_0) and the F16 files (f16:
# activations rounded to F16; x86's own sets 0.02 apart). The files whose code the NEON sets share (F32, F16)
# under the first set only; the quantized ones, whose integer dots differ by set (SMULL, SDOT, SMMLA), under each.
for f in stories260K-f32 stories260K-q8_0 stories260K-q4_0 synth256-q8_0 synth256-q4_k_m synth256-iq4_nl synth128-q4_1 \
         synth128-q5_k_m synth128-f16 synth256-q2_k synth256-q3_k_m; do
  [ -f "$data/gguf/$f.gguf" ] || { echo "skip $f: $data/gguf/$f.gguf absent"; continue; }
  prof=f32; case $f in *-q4_0) prof=q4_0 ;; stories260K-q8_0) prof=q8_0 ;; *-f16) prof=f16 ;; esac
  sets=$all_sets; case $f in *-f32|*-f16) sets=${all_sets%% *} ;; esac
  check "gguf-$f" "$prof" --model "$data/gguf/$f.gguf" --prompt "Once upon a time" --max-tokens 24 --sampler greedy --trace-level full
done
sets=$all_sets

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

# The golden traces and llama2.c's logits are no longer checked here: tools/cross-arm64.sh --test runs
# test_golden itself under qemu (its child runs through GLASSBOX_TEST_LAUNCHER), and test_gguf_model's
# llama.cpp cases.
[ $fail -eq 0 ] && echo "arm64-compare: all equal" || echo "arm64-compare: differences above"
exit $fail
