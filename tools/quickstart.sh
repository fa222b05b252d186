#!/usr/bin/env bash
# First contact: install dependencies, build glassbox, and run the embedded toy model.
# Usage: tools/quickstart.sh ["prompt"] [more `glassbox run` options]
set -euo pipefail
cd "$(dirname "$0")/.."
build=${GLASSBOX_BUILD_DIR:-build}
tools/install-deps.sh >&2
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo >&2
# Only what `run` needs (the binary, its modules, the toy model): the test suite is tools/test.sh's.
cmake --build "$build" -j"$(nproc)" --target glassbox_runtime >&2
prompt=${1:-The weather today is}
shift || true
echo "\$ $build/bin/glassbox run --prompt \"$prompt\" --show-probs --echo $*" >&2
exec "$build/bin/glassbox" run --prompt "$prompt" --show-probs --echo "$@"
