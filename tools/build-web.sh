#!/usr/bin/env bash
# glassbox compiled to WebAssembly with Debian's emscripten (issue #43, docs/web.md): builds into build-web/
#   build-web/glassbox.mjs + .wasm   the command line under node, with the host's files (-sNODERAWFS)
#   build-web/index.html + worker    the page: a second target over MEMFS, run in a Web Worker
# Usage: tools/build-web.sh [--test] [--jobs N]
#   --test: then runs tests/web/test-web-node.sh (and tests/web/test-web-page.sh where chromium is installed).
# Nothing is fetched at build time but Debian packages: emscripten's "ports" download from the internet and
# are not used. The header-only libraries (xtensor, xsimd, xtl, nlohmann-json, CLI11) are Debian's own headers,
# linked into build-web/deps/include (not /usr/include itself, whose C library headers are not emscripten's);
# yaml-cpp, the one compiled library the CLI needs, is built from Debian's source package (apt-get source).
# Boost.DLL/Filesystem, Graphviz, cpp-httplib and ICU are left out: see docs/web.md for what that costs.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
OUT=${GLASSBOX_WEB_OUT:-$ROOT/build-web}  # (another folder: to time a build from scratch beside it)
JOBS=2
TEST=0
while [ $# -gt 0 ]; do
  case "$1" in
    --test) TEST=1 ;;
    --jobs) JOBS=$2; shift ;;
    *) echo "build-web.sh: unknown argument '$1' (expected --test, --jobs N)" >&2; exit 2 ;;
  esac
  shift
done

# --- what it needs from Debian --------------------------------------------------------------------------
need=()
command -v emcc >/dev/null || need+=(emscripten)
[ -d /usr/share/nodejs/acorn ] || need+=(node-acorn)
for h in xtensor/xtensor.hpp xsimd/xsimd.hpp xtl/xtl_config.hpp nlohmann/json.hpp CLI/CLI.hpp boost/test/included/unit_test.hpp; do
  [ -e /usr/include/$h ] || need+=("$(case $h in xtensor*) echo xtensor-dev;; xsimd*) echo libxsimd-dev;; xtl*) echo xtl-dev;;
                                       nlohmann*) echo nlohmann-json3-dev;; CLI*) echo libcli11-dev;; boost*) echo libboost-dev;; esac)")
done
if [ ${#need[@]} -gt 0 ]; then
  echo "build-web.sh: installing ${need[*]}"
  apt-get install -y "${need[@]}"
fi
export NODE_PATH=/usr/share/nodejs${NODE_PATH:+:$NODE_PATH}  # emscripten's optimizer needs acorn
# ccache for emscripten's clang too (the same cache as the native build: /root/ccenv.sh where there is one).
if command -v ccache >/dev/null; then
  [ -f /root/ccenv.sh ] && source /root/ccenv.sh
  LAUNCHER=(-DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
else
  LAUNCHER=()
fi

DEPS=$OUT/deps
mkdir -p "$DEPS/include" "$DEPS/src"
# Header-only libraries: Debian's headers, one link per library (its folder, nothing else of /usr/include);
# Boost's for the kernel tests under node (Boost.Test's header-only variant).
for d in xtensor xsimd xtl nlohmann CLI boost; do ln -sfn /usr/include/$d "$DEPS/include/$d"; done
ln -sf /usr/include/xtensor.hpp "$DEPS/include/xtensor.hpp" 2>/dev/null || true

# yaml-cpp from Debian's source package, built once with emscripten into deps/ (static, no tests/tools).
if [ ! -f "$DEPS/lib/libyaml-cpp.a" ]; then
  src=$(ls -d "$DEPS"/src/yaml-cpp-*/ 2>/dev/null | head -1 || true)
  if [ -z "$src" ]; then
    apt_dir=$DEPS/apt
    mkdir -p "$apt_dir/parts" "$apt_dir/lists/partial"
    # A private deb-src list (the machine's own lists may have none): Debian's archive, the same keyring.
    suite=$(. /etc/os-release && echo "$VERSION_CODENAME")
    printf 'Types: deb-src\nURIs: http://deb.debian.org/debian\nSuites: %s\nComponents: main\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n' \
      "$suite" >"$apt_dir/parts/src.sources"
    aptopt=(-o Dir::Etc::SourceList=/dev/null -o Dir::Etc::SourceParts="$apt_dir/parts" -o Dir::State::Lists="$apt_dir/lists")
    apt-get "${aptopt[@]}" update >/dev/null
    (cd "$DEPS/src" && apt-get "${aptopt[@]}" source --download-only yaml-cpp >/dev/null 2>&1)
    (cd "$DEPS/src" && tar xf yaml-cpp_*.orig.tar.*)
    src=$(ls -d "$DEPS"/src/yaml-cpp-*/ | head -1)
  fi
  emcmake cmake -S "$src" -B "$DEPS/build-yaml" -DCMAKE_BUILD_TYPE=Release -DCMAKE_INSTALL_PREFIX="$DEPS" \
    -DYAML_CPP_BUILD_TESTS=OFF -DYAML_CPP_BUILD_TOOLS=OFF -DYAML_CPP_BUILD_CONTRIB=OFF -DYAML_BUILD_SHARED_LIBS=OFF \
    "${LAUNCHER[@]}" >/dev/null
  cmake --build "$DEPS/build-yaml" -j"$JOBS" >/dev/null
  cmake --install "$DEPS/build-yaml" >/dev/null
fi

# --- glassbox -------------------------------------------------------------------------------------------
emcmake cmake -S "$ROOT" -B "$OUT" -DCMAKE_BUILD_TYPE=Release -DBUILD_TESTING=OFF \
  -DGLASSBOX_WEB_DEPS="$DEPS" -DGLASSBOX_UNITY=ON "${LAUNCHER[@]}" >/dev/null
cmake --build "$OUT" -j"$JOBS" --target glassbox_node glassbox_web
echo "build-web.sh: built $OUT/glassbox.mjs, $OUT/index.html"

if [ "$TEST" = 1 ]; then
  tests/web/test-web-node.sh "$OUT"
  if command -v chromium >/dev/null; then tests/web/test-web-page.sh "$OUT"; fi
fi
