#!/usr/bin/env bash
# The built-in modules linked in (GLASSBOX_STATIC_PLUGINS=ON, docs/plugins.md): configure and build that
# tree, then run the suites whose subject the change touches: the registry (loading, rejections, guards,
# linked-in listing), the sampler stages and their parameters, the tokenizers, the models and the goldens
# (the same tokens as the shared-module build), and the out-of-tree plugin built against the installed
# package and loaded by the static glassbox. Expects tools/install-deps.sh to have run (tools/test.sh does).
# Usage: tools/test-static.sh [extra ctest arguments]     (build folder: $GLASSBOX_STATIC_BUILD_DIR or ./build-static)
set -euo pipefail
cd "$(dirname "$0")/.."
build=${GLASSBOX_STATIC_BUILD_DIR:-build-static}
tests=(test_registry test_samplers test_sampler_params test_sampler_cli test_tokenizer test_bpe_tokenizer test_model test_golden)
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DGLASSBOX_STATIC_PLUGINS=ON
cmake --build "$build" -j"$(nproc)" --target glassbox_runtime "${tests[@]}" bad_abi no_entry throwing dup_greedy dup_module test_vocab
# The bpe tokenizer's reference vocabularies: the default build's copy when there is one (tools/test.sh).
if [ -d "${GLASSBOX_BUILD_DIR:-build}/npm-tokenizers" ] && [ ! -e "$build/npm-tokenizers" ]; then
  ln -s "$(realpath "${GLASSBOX_BUILD_DIR:-build}/npm-tokenizers")" "$build/npm-tokenizers"
fi
regex="^($(IFS='|'; echo "${tests[*]}")|sampler_plugin_example)\$"
ctest --test-dir "$build" --output-on-failure -j"$(nproc)" -R "$regex" "$@"
