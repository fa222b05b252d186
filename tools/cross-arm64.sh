#!/usr/bin/env bash
# glassbox for arm64 (aarch64 Linux), built and run on an x86-64 Debian 12 machine:
#   tools/cross-arm64.sh [TARGET...]   installs what it needs, builds build-arm64/ (default targets: the binary,
#                                      its modules, the toy model, the kernel tests)
#   tools/cross-arm64.sh --run ARGS…   runs build-arm64/bin/glassbox ARGS… under qemu-aarch64
#   tools/cross-arm64.sh --test        the arm64 checks CI runs (docs/reliability.md, "arm64"): the kernel and
#                                      quantization tests under each NEON set, llama.cpp's and llama2.c's golden
#                                      tests (test_gguf_model, test_golden), and the arm64 binary's output and
#                                      traces against the x86-64 build's (tools/arm64-compare.sh)
# Debian's cross toolchain (crossbuild-essential-arm64) and qemu-user come from apt. The arm64 builds of the
# libraries are Debian's :arm64 packages, but unpacked into build-arm64/sysroot rather than installed with
# dpkg: several -dev packages (libyaml-cpp-dev, libgraphviz-dev's dependencies) are not co-installable with
# their amd64 twins, and installing them would remove the native build's. Environment: QEMU_CPU (default
# max: every extension qemu emulates, dotprod and i8mm included), GLASSBOX_ARM64_SYSROOT (another sysroot).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
build=$root/build-arm64
sysroot=${GLASSBOX_ARM64_SYSROOT:-$build/sysroot}
export GLASSBOX_ARM64_SYSROOT=$sysroot
qemu=(qemu-aarch64 -L "$sysroot" -cpu "${QEMU_CPU:-max}")

if [ "${1:-}" = "--run" ]; then
  shift
  exec "${qemu[@]}" "$build/bin/glassbox" "$@"
fi

# The dependencies of tools/install-deps.sh, as arm64 packages (headers-only ones are architecture-independent).
arm64_pkgs=(libc6-dev libstdc++-12-dev libgomp1 libxtensor-dev libxsimd-dev libyaml-cpp-dev libboost-test-dev libboost-filesystem-dev
            libboost-dev libgraphviz-dev libicu-dev libcpp-httplib-dev libssl-dev)
all_pkgs=(xtensor-dev xtl-dev nlohmann-json3-dev libcli11-dev)

install_host() {
  local need=()
  for p in crossbuild-essential-arm64 qemu-user cmake pkg-config; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || need+=("$p")
  done
  local SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  if ! dpkg --print-foreign-architectures | grep -qx arm64; then
    $SUDO dpkg --add-architecture arm64
    need+=(update)
  fi
  if [ ${#need[@]} -gt 0 ]; then
    echo "cross-arm64: installing ${need[*]}"
    export DEBIAN_FRONTEND=noninteractive
    $SUDO apt-get update -qq
    local real=()
    for p in "${need[@]}"; do [ "$p" = update ] || real+=("$p"); done
    [ ${#real[@]} -eq 0 ] || $SUDO apt-get install -y -qq --no-install-recommends "${real[@]}"
  fi
}

# The arm64 packages and everything they depend on that is built per architecture, unpacked into $sysroot.
make_sysroot() {
  local stamp=$sysroot/.glassbox-sysroot
  local want="${arm64_pkgs[*]} ${all_pkgs[*]}"
  if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then return; fi
  echo "cross-arm64: unpacking the arm64 packages into $sysroot"
  local debs=$build/debs
  rm -rf "$sysroot" && mkdir -p "$sysroot" "$debs"
  apt-cache depends --recurse --no-recommends --no-suggests --no-conflicts --no-breaks --no-replaces --no-enhances \
      "${arm64_pkgs[@]/%/:arm64}" 2>/dev/null | grep -v '^ ' | grep ':arm64$' | sort -u > "$build/arm64-packages.txt"
  (cd "$debs" && apt-get download -qq $(cat "$build/arm64-packages.txt") "${all_pkgs[@]}")
  for d in "$debs"/*.deb; do dpkg-deb -x "$d" "$sysroot"; done
  echo "$want" > "$stamp"
}

if [ "${1:-}" != "--test" ] || [ ! -x "$build/bin/glassbox" ]; then
  install_host
  make_sysroot
fi

launcher=()
if command -v ccache >/dev/null; then launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_C_COMPILER_LAUNCHER=ccache); fi
build_targets() {
  cmake -S "$root" -B "$build" -DCMAKE_TOOLCHAIN_FILE="$root/cmake/toolchain-aarch64.cmake" \
        -DCMAKE_BUILD_TYPE=RelWithDebInfo "${launcher[@]}" > "$build/cmake.log" || { cat "$build/cmake.log"; exit 1; }
  cmake --build "$build" -j"${GLASSBOX_JOBS:-$(nproc)}" --target "$@"
}

if [ "${1:-}" = "--test" ]; then
  shift
  build_targets glassbox_runtime test_kernels test_quant test_gguf_model test_golden
  t0=$(date +%s)
  # The CPU detection (AT_HWCAP): qemu's Cortex-A53 has neither SDOT nor SMMLA, its Cortex-A76 SDOT only; the
  # trace's header names the set a run used.
  for want in "cortex-a53 neon" "cortex-a76 neon-dotprod" "max neon-i8mm"; do
    read -r cpu expect <<< "$want"
    QEMU_CPU=$cpu "$0" --run run --prompt "The" --max-tokens 1 --sampler greedy --trace "$build/detect.jsonl" > /dev/null 2>&1
    got=$(head -1 "$build/detect.jsonl" | grep -oE '"kernels":"[^"]*"' | cut -d'"' -f4)
    [ "$got" = "$expect" ] || { echo "cross-arm64: on qemu's $cpu the kernel set is '$got', expected $expect" >&2; exit 1; }
    echo "cross-arm64: qemu -cpu $cpu picks $got"
  done
  # test_kernels runs every check under each set this CPU has (-cpu max: neon-i8mm, neon-dotprod, neon,
  # scalar); test_quant's dot products use the set in use: test_quant under the default, its dot product
  # cases under the other NEON sets. Left to the x86-64 suite for CI's time (~15 s of qemu CPU): the scalar
  # quantizers' reproduction of llama-quantize's files and their round trips (the same C++ on both machines,
  # -ffp-contract=off; arm64-compare's scalar-set logits show its bits agree), and the dots under the scalar set.
  # (Not exp_floats_is_libm_expf: the NEON sets' exp is the scalar set's, libm's expf itself.)
  "${qemu[@]}" "$build/bin/test_kernels" --log_level=warning --run_test='!exp_floats_is_libm_expf'
  "${qemu[@]}" "$build/bin/test_quant" --log_level=warning \
    '--run_test=!reference_files/quantize_row_reproduces_llama_quantize' '--run_test=!weight_quantizers_round_trip_and_stay_finite'
  dots=vec_dot_matches_scalar_and_dequantized_dot:half_dot_products_widen_every_finite_value_exactly
  dots+=:q8_0_dot_is_exact_for_extreme_bytes:k_quant_dots_are_exact_for_extreme_bytes
  for set in neon-dotprod neon; do
    GLASSBOX_KERNELS=$set "${qemu[@]}" "$build/bin/test_quant" --log_level=warning --run_test="$dots"
  done
  echo "cross-arm64: kernel tests under qemu $(( $(date +%s) - t0 )) s"
  # The golden tests against the other engines, as test executables under qemu: test_gguf_model (GGUF files
  # of ../shared against llama.cpp's logits and greedy ids) and test_golden (the stories260K golden traces;
  # the greedy one against llama2.c's logits). Their child `glassbox` processes are arm64 too: run_cli puts $GLASSBOX_TEST_LAUNCHER before the
  # binary (qemu-user without binfmt runs only the process it started). Under -cpu max: neon-i8mm.
  t1=$(date +%s)
  export GLASSBOX_TEST_LAUNCHER="${qemu[*]}" GLASSBOX_CACHE_DIR=$build/tests/cache
  # A sample of files for CI's time (the whole of both suites takes ~190 s of qemu here): test_gguf_model's
  # logits against llama.cpp's, teacher-forced at every position, on stories260K F32, Q8_0 (with F16 ffn_down),
  # Q4_0 (with Q8_0 output) and synth256 Q4_K_M (Q4_K/Q6_K), Q2_K (Q2_K/Q3_K/Q4_K), IQ4_NL (kCases' order: _0,
  # _2, _3, _12, _16, _18), its greedy ids on stories260K F32 (all 120 steps must match), and that every
  # reference file is a case; test_golden's three stories260K goldens rerun, replayed and diffed, and the
  # greedy one against llama2.c's logits.
  "${qemu[@]}" "$build/bin/test_gguf_model" --log_level=warning \
    --run_test=reference_files/logits_match_llama_cpp/_0,_2,_3,_12,_16,_18 \
    --run_test=reference_files/greedy_ids_match_llama_cpp_until_a_near_tie/_0 --run_test=reference_files/every_reference_file_is_a_case
  "${qemu[@]}" "$build/bin/test_golden" --log_level=warning \
    --run_test=golden_reruns_and_replays_within_tolerance/_0,_1,_2 --run_test=greedy_golden_agrees_with_llama2c
  unset GLASSBOX_TEST_LAUNCHER GLASSBOX_CACHE_DIR
  echo "cross-arm64: llama.cpp and llama2.c golden tests under qemu $(( $(date +%s) - t1 )) s"
  exec tools/arm64-compare.sh "$@"
fi

if [ $# -eq 0 ]; then set -- glassbox_runtime test_kernels test_quant; fi
build_targets "$@"
echo "cross-arm64: built $* in $build (run: tools/cross-arm64.sh --run ARGS…)"
