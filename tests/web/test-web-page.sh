#!/usr/bin/env bash
# The page (build-web/index.html, issue #43) in Debian's headless Chromium, served from 127.0.0.1: opened with
# ?prompt=The%20weather%20today%20is&max_tokens=4&sampler=greedy&autorun=1 it runs the embedded toy in its Web
# Worker, shows " sunny" in #output, draws a step with bars and sets data-glassbox="done" on <body>, with no
# console errors; a GGUF picked in the file input runs; a file that is not a model gets a message on the page
# and the page still runs afterwards.
# Usage: tests/web/test-web-page.sh [BUILD_WEB_DIR [SCREENSHOT.png]]
# Exits 0 with "SKIP: reason" when the web build, chromium or python3 is absent.
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
WEB=$(cd "${1:-$ROOT/build-web}" 2>/dev/null && pwd || true)
SHOT=${2:-}
skip() { echo "SKIP: $*"; exit 0; }
[ -n "$WEB" ] && [ -f "$WEB/index.html" ] && [ -f "$WEB/glassbox-web.wasm" ] || skip "no web page build (${1:-build-web}/index.html): run tools/build-web.sh"
command -v chromium >/dev/null || skip "no chromium (apt-get install chromium)"
command -v python3 >/dev/null || skip "no python3 to serve the page"

TMP=$(mktemp -d)
server=
trap '[ -n "$server" ] && kill "$server" 2>/dev/null; rm -rf "$TMP"' EXIT
# A free port, then the build folder served on it (127.0.0.1 only); .mjs served as JavaScript.
PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
python3 - "$WEB" "$PORT" >"$TMP/server.log" 2>&1 <<'EOF' &
import http.server, sys, functools
h = functools.partial(http.server.SimpleHTTPRequestHandler, directory=sys.argv[1])
h.func.extensions_map.update({".mjs": "text/javascript", ".js": "text/javascript", ".wasm": "application/wasm"})
http.server.ThreadingHTTPServer(("127.0.0.1", int(sys.argv[2])), h).serve_forever()
EOF
server=$!
for _ in $(seq 50); do python3 -c "import urllib.request; urllib.request.urlopen('http://127.0.0.1:$PORT/index.html')" 2>/dev/null && break; sleep 0.1; done

# tests/web/page-driver.mjs drives Chromium over the DevTools protocol (node's WebSocket) and waits in real
# time for the worker; it prints what the page shows as one JSON object.
drive() { timeout 300 node --experimental-websocket --no-warnings "$ROOT/tests/web/page-driver.mjs" "$@" 2>>"$TMP/driver.err"; }
fails=0
# check NAME CONDITION(python over r) DRIVER_ARGS...
check() {
  local name=$1 cond=$2; shift 2
  local json
  json=$(drive "$@")
  if python3 -c "import json,sys; r=json.loads(sys.argv[1]); sys.exit(0 if ($cond) and not r.get('consoleErrors') else 1)" "$json" 2>/dev/null; then
    echo "ok:   $name: $(cut -c1-220 <<<"$json")"
  else
    echo "FAIL: $name: $json (want $cond, no console errors)"
    tail -3 "$TMP/driver.err"
    fails=$((fails + 1))
  fi
}
U="http://127.0.0.1:$PORT/index.html"
check "toy greedy from the URL" "r['mark'] == 'done' and ' sunny' in r['output'] and r['bars'] > 0 and r['download']" \
  "$U?prompt=The%20weather%20today%20is&max_tokens=4&sampler=greedy&autorun=1" ${SHOT:+--screenshot "$SHOT"}
check "toy seeded from the URL" "r['mark'] == 'done' and r['steps'] >= 1 and r['bars'] > 0" \
  "$U?prompt=The%20weather%20today%20is&max_tokens=6&sampler=top-k:3,temperature:0.8&seed=5&autorun=1"
# An absolute path without '..': Chromium cannot read a picked file named through '..' (NotReadableError).
DATA=$(cd "${GLASSBOX_TEST_DATA:-$ROOT/../shared}" 2>/dev/null && pwd -P || echo "${GLASSBOX_TEST_DATA:-$ROOT/../shared}")
if [ -f "$DATA/gguf/synth256-q4_k_m.gguf" ]; then
  check "a GGUF picked in the file input" "r['mark'] == 'done' and r['steps'] >= 1 and r['bars'] > 0 and 'synth256-q4_k_m.gguf' in r['info']" \
    "$U?prompt=Once%20upon%20a%20time&max_tokens=8&sampler=greedy" --pick "model-file=$DATA/gguf/synth256-q4_k_m.gguf" --run
else
  echo "skip: no $DATA/gguf/synth256-q4_k_m.gguf for the file-input case"
fi
printf 'not a model at all\n' >"$TMP/notes.gguf"
check "a file that is not a model: a message on the page" "r['mark'] == 'error-shown' and 'notes.gguf' in r['status']" \
  "$U" --pick "model-file=$TMP/notes.gguf" --expect-error
check "the page keeps working after it" "r['mark'] == 'done' and ' sunny' in r['output'] and r['bars'] > 0" \
  "$U?prompt=The%20weather%20today%20is&max_tokens=4&sampler=greedy" --pick "model-file=$TMP/notes.gguf" --run
[ -n "$SHOT" ] && [ -s "$SHOT" ] && echo "screenshot: $SHOT"
[ $fails -eq 0 ] && echo "page tests passed"
[ $fails -eq 0 ]
