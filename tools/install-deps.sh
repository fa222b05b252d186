#!/usr/bin/env bash
# Installs glassbox's build and test dependencies from Debian 12's archive.
# Idempotent: packages already present are skipped; apt-get runs only when needed.
set -euo pipefail

# Build + test (always needed).
pkgs=(build-essential cmake pkg-config
      xtensor-dev libxsimd-dev libyaml-cpp-dev
      libboost-test-dev libboost-filesystem-dev libboost-dev
      nlohmann-json3-dev libcli11-dev libgraphviz-dev
      libicu-dev    # optional (GLASSBOX_ICU): the bpe tokenizer's regex engine for tokenizer.json Split patterns it has no
                    # built-in rule for, test_pretokenizer's reference, and tools/gen-unicode-tables.sh's Unicode data
      libcpp-httplib-dev   # glassbox serve's HTTP server and its tests' client (what llama.cpp's server uses)
      librsvg2-bin)        # rsvg-convert: `compare --figures` draws each chart's PNG from its SVG (librsvg, already Graphviz's SVG loader)

# Optional groups: GLASSBOX_DEPS_EXTRA="train" adds the model recipe's tools.
for extra in ${GLASSBOX_DEPS_EXTRA:-}; do
  case "$extra" in
    # OpenBLAS: Debian's torch otherwise runs on the reference BLAS, ~5x slower (models/toy/recipe.sh)
    train) pkgs+=(python3-torch python3-numpy sentencepiece python3-sentencepiece libopenblas0-pthread) ;;
    browser) pkgs+=(chromium) ;;
    fuzz) pkgs+=(clang-14 libclang-rt-14-dev) ;;  # tools/sanitize.sh and tools/fuzz.sh (clang, libFuzzer)
    # tools/cross-arm64.sh's host side (it installs these itself too; the arm64 libraries go to its sysroot)
    arm64) pkgs+=(crossbuild-essential-arm64 qemu-user) ;;
    # tools/serve-replicas.sh and the serve_replicas test (docs/serve.md, "Several replicas"): Debian's nginx,
    # run as a child with a config of its own (the package's service is not started in a container)
    nginx) pkgs+=(nginx curl python3) ;;  # (the test is a Python script)
    *) echo "install-deps: unknown extra group '$extra' (expected: train, browser, fuzz, arm64, nginx)" >&2; exit 2 ;;
  esac
done

missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#pkgs[@]} packages present"
  exit 0
fi
echo "install-deps: installing ${missing[*]}"
SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
