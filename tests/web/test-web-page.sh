#!/usr/bin/env bash
# The page (build-web/index.html, issue #43) in Debian's headless Chromium, served from 127.0.0.1: opened with
# ?prompt=The%20weather%20today%20is&max_tokens=4&sampler=greedy&autorun=1 it runs the embedded toy in its Web
# Worker, shows " sunny" in #output, draws a step with bars and sets data-glassbox="done" on <body>, with no
# console errors; a GGUF picked in the file input runs; a file that is not a model gets a message on the page
# and the page still runs afterwards; Step three times shows three tokens, the first three of the same run;
# Pause stops a paced run and Resume ends it with the tokens of an unpaused one; each step shows its logit
# lens (a row per layer), its KV cache (a held cell per position) and the attention of the layer and head
# chosen (a cell per position, with its token) and that head's matrix across the steps; ?model=URL runs a served GGUF, and a
# missing URL, a file that is not a model, a truncated GGUF and a download cut short each get a message.
# The server serves the build folder, /t/NAME from the test's own folder, and /cut/NAME with a Content-Length
# of the whole file but only half its bytes (a connection that broke off).
# Usage: tests/web/test-web-page.sh [BUILD_WEB_DIR [SCREENSHOT.png]]
#   GLASSBOX_PAGE_ONLY=REGEX runs only the checks whose names match (grep -E), while working on one.
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
mkdir -p "$TMP/files"
server=
trap '[ -n "$server" ] && kill "$server" 2>/dev/null; rm -rf "$TMP"' EXIT
# A free port, then the build folder served on it (127.0.0.1 only); .mjs served as JavaScript.
PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
python3 - "$WEB" "$PORT" "$TMP/files" >"$TMP/server.log" 2>&1 <<'EOF' &
import http.server, sys, os
class H(http.server.SimpleHTTPRequestHandler):
    extensions_map = {**http.server.SimpleHTTPRequestHandler.extensions_map,
                      ".mjs": "text/javascript", ".js": "text/javascript", ".wasm": "application/wasm"}
    def __init__(self, *a, **k): super().__init__(*a, directory=sys.argv[1], **k)
    def do_GET(self):
        for prefix in ("/t/", "/cut/"):
            if self.path.startswith(prefix):
                f = os.path.join(sys.argv[3], os.path.basename(self.path[len(prefix):]))
                if not os.path.isfile(f): return self.send_error(404)
                data = open(f, "rb").read()
                self.send_response(200)
                self.send_header("Content-Type", "application/octet-stream")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data if prefix == "/t/" else data[: len(data) // 2])
                self.wfile.flush()
                self.close_connection = True
                return
        return super().do_GET()
http.server.ThreadingHTTPServer(("127.0.0.1", int(sys.argv[2])), H).serve_forever()
EOF
server=$!
for _ in $(seq 50); do python3 -c "import urllib.request; urllib.request.urlopen('http://127.0.0.1:$PORT/index.html')" 2>/dev/null && break; sleep 0.1; done

# tests/web/page-driver.mjs drives Chromium over the DevTools protocol (node's WebSocket) and waits in real
# time for the worker; it prints what the page shows as one JSON object.
drive() { timeout 300 node --experimental-websocket --no-warnings "$ROOT/tests/web/page-driver.mjs" "$@" 2>>"$TMP/driver.err"; }
fails=0
wanted() { [ -z "${GLASSBOX_PAGE_ONLY:-}" ] || grep -qE "$GLASSBOX_PAGE_ONLY" <<<"$1"; }
# check NAME CONDITION(python over r) DRIVER_ARGS...
check() {
  local name=$1 cond=$2; shift 2
  local json
  wanted "$name" || return 0
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

# Step and pause (#43). The toy, greedy, up to 8 tokens: three Steps show three tokens, one a Step, the first
# three of the same run (a run of 3).
G="$U?prompt=The%20weather%20today%20is&sampler=greedy&ignore_eos=1"
ref=; wanted "Step three" && ref=$(drive "$G&max_tokens=3&autorun=1")
check "Step three times: three tokens, those of a run of 3" \
  "r['mark'] == 'done' and r['steps'] == 3 and r['dataSteps'] == 3 and r['tokens'] == $(python3 -c "import json,sys; print(json.loads(sys.argv[1])['tokens'])" "$ref" 2>/dev/null || echo None) and len(r['tokens']) == 3" \
  "$G&max_tokens=8" --click step --click step --click step
check "Step past the end starts a new run" "r['mark'] == 'done' and r['steps'] == 1" "$G&max_tokens=2" --click step --click step --click step
# Seeded and paced (80 ms a token), 12 tokens: paused after 3, the page holds what it showed and says paused;
# Resume ends the run with the tokens of an unpaused run of the same seed.
P="$U?prompt=The%20weather%20today%20is&max_tokens=12&sampler=top-k:5,temperature:1.2&seed=7&ignore_eos=1&pace=80"
check "Pause a paced run after 3 tokens" "r['mark'] == 'paused' and 3 <= r['steps'] < 12 and r['pauseLabel'] == 'Resume'" "$P" --start run --pause-after 3
full=; wanted "Resume" && full=$(drive "${P/pace=80/pace=0}&autorun=1")
check "Resume after a pause: the tokens of an unpaused run" \
  "r['mark'] == 'done' and r['steps'] == 12 and r['tokens'] == $(python3 -c "import json,sys; print(json.loads(sys.argv[1])['tokens'])" "$full" 2>/dev/null || echo None)" \
  "$P" --start run --pause-after 3 --click pause
# The views of each step: the toy has 4 layers; at step k the KV cache holds the prompt's 5 positions + k.
check "logit lens and KV cache of the step shown" "r['mark'] == 'done' and r['lensRows'] == 4 and r['kvTokens'] == 5 + 2 and r['kvHeld'] == 5 + 2" \
  "$G&max_tokens=8" --click step --click step --click step
# Attention of a chosen layer and head: at the third step, position 6 attends to the 7 positions held, each
# cell with its token (the prompt's from `tokenize`), the weights summing to 1; a layer the toy lacks is its error.
# The matrix across the steps: a row per step (positions 4, 5, 6), each shading the positions it held (5, 6, 7
# of 7 columns; the causal mask leaves the rest empty), its weights summing to 1.
check "attention of layer 2, head 1 at the step shown, and its matrix across the steps" \
  "r['mark'] == 'done' and len(r['attn']) == 1 and r['attn'][0]['layer'] == 2 and r['attn'][0]['head'] == 1 and abs(r['attn'][0]['sum'] - 1) < 1e-4 and r['attn'][0]['cells'] == ['<s>', ' The', ' weather', ' today', ' is'] + r['tokens'][:2] and len(r['matrix']) == 1 and (r['matrix'][0]['layer'], r['matrix'][0]['head']) == (2, 1) and [x['pos'] for x in r['matrix'][0]['rows']] == [4, 5, 6] and [x['shaded'] for x in r['matrix'][0]['rows']] == [5, 6, 7] and [x['empty'] for x in r['matrix'][0]['rows']] == [2, 1, 0] and all(abs(x['sum'] - 1) < 1e-4 for x in r['matrix'][0]['rows'])" \
  "$G&max_tokens=8&attention=2:1" --click step --click step --click step
check "attention of a layer the model lacks: its error on the page" "r['mark'] == 'error' and '9:0' in r['status'] and 'outside' in r['status']" \
  "$G&max_tokens=2&attention=9:0&autorun=1"

# A model from a URL (#43): a served GGUF runs; what cannot be had or is not a model is said on the page.
if [ -f "$DATA/gguf/synth256-q4_k_m.gguf" ]; then
  cp "$DATA/gguf/synth256-q4_k_m.gguf" "$TMP/files/synth.gguf"
  head -c $(( $(stat -c %s "$TMP/files/synth.gguf") / 2 )) "$TMP/files/synth.gguf" >"$TMP/files/half.gguf"
  check "?model=URL: a served GGUF runs" "r['mark'] == 'done' and r['steps'] >= 1 and 'synth.gguf' in r['info']" \
    "$U?prompt=Once&max_tokens=4&sampler=greedy&model=/t/synth.gguf&autorun=1"
  check "?model=URL: a truncated GGUF gets its error" "r['mark'] == 'error' and 'half.gguf' in r['status'] and r['steps'] == 0" \
    "$U?max_tokens=4&model=/t/half.gguf&autorun=1"
  check "?model=URL: a download cut short gets its error" "r['mark'] == 'error' and 'cannot fetch' in r['status'] and r['steps'] == 0" \
    "$U?max_tokens=4&model=/cut/synth.gguf&autorun=1"
else
  echo "skip: no $DATA/gguf/synth256-q4_k_m.gguf for the model-URL cases"
fi
cp "$TMP/notes.gguf" "$TMP/files/notes.gguf"
check "?model=URL: a missing file gets HTTP 404 on the page" "r['mark'] == 'error' and 'HTTP 404' in r['status'] and r['steps'] == 0" \
  "$U?max_tokens=4&model=/t/missing.gguf&autorun=1"
check "?model=URL: a file that is not a model gets its error" "r['mark'] == 'error' and 'notes.gguf' in r['status'] and r['steps'] == 0" \
  "$U?max_tokens=4&model=/t/notes.gguf&autorun=1"
check "the URL field: a bad URL, then the toy still runs" "r['mark'] == 'done' and ' sunny' in r['output']" \
  "$U?prompt=The%20weather%20today%20is&max_tokens=4&sampler=greedy" --set model-url=/t/missing.gguf --click load-url --click use-toy --run
[ -n "$SHOT" ] && [ -s "$SHOT" ] && echo "screenshot: $SHOT"
[ $fails -eq 0 ] && echo "page tests passed"
[ $fails -eq 0 ]
