#!/usr/bin/env bash
# The page (build-web/index.html, issue #43) in Debian's headless Chromium, served from 127.0.0.1: opened with
# ?prompt=The%20weather%20today%20is&max_tokens=4&sampler=greedy&autorun=1 it runs the embedded toy in its Web
# Worker, shows " sunny" in #output, draws a step with bars and sets data-glassbox="done" on <body>.
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

# --virtual-time-budget lets the page run its worker before the DOM is dumped; the worker's compute is real
# time, so the test polls: each try dumps the DOM again, until the page says it is done or an error.
chrome() {
  timeout 120 chromium --headless=new --no-sandbox --disable-gpu --disable-dev-shm-usage --no-first-run \
    --user-data-dir="$TMP/profile" --virtual-time-budget=30000 "$@" 2>>"$TMP/chrome.err"
}
fails=0
check_page() {  # NAME QUERY EXPECTED_OUTPUT_SUBSTRING
  local name=$1 query=$2 want=$3 dom=$TMP/dom.html
  for _ in 1 2 3; do
    chrome --dump-dom "http://127.0.0.1:$PORT/index.html?$query" >"$dom"
    grep -q 'data-glassbox="' "$dom" && break
  done
  local out
  out=$(python3 - "$dom" <<'EOF'
import sys, html.parser
class P(html.parser.HTMLParser):
    def __init__(s): super().__init__(); s.on = None; s.out = ""; s.status = ""; s.body = {}; s.bars = 0
    def handle_starttag(s, t, a):
        a = dict(a)
        if t == "body": s.body = a
        if a.get("id") in ("output", "status"): s.on = a["id"]
        if a.get("class", "").startswith("row"): s.bars += 1
    def handle_endtag(s, t): s.on = None
    def handle_data(s, d):
        if s.on == "output": s.out += d
        if s.on == "status": s.status += d
p = P(); p.feed(open(sys.argv[1]).read())
print(p.body.get("data-glassbox", "")); print(p.bars); print(p.status); print(repr(p.out))
EOF
)
  local mark bars st text
  mark=$(sed -n 1p <<<"$out"); bars=$(sed -n 2p <<<"$out"); st=$(sed -n 3p <<<"$out"); text=$(sed -n 4p <<<"$out")
  if [ "$mark" = done ] && grep -qF "$want" <<<"$text" && [ "$bars" -gt 0 ]; then
    echo "ok:   $name: #output $text, $bars bars, body data-glassbox=\"done\" ($st)"
  else
    echo "FAIL: $name: data-glassbox='$mark', #output $text, $bars bars, status '$st' (want '$want')"
    tail -5 "$TMP/chrome.err"
    fails=$((fails + 1))
  fi
}
check_page "toy greedy" "prompt=The%20weather%20today%20is&max_tokens=4&sampler=greedy&autorun=1" " sunny"
check_page "toy seeded" "prompt=The%20weather%20today%20is&max_tokens=6&sampler=top-k:3,temperature:0.8&seed=5&autorun=1" ""
if [ -n "$SHOT" ]; then
  chrome --window-size=1200,1400 --screenshot="$SHOT" "http://127.0.0.1:$PORT/index.html?prompt=The%20weather%20today%20is&max_tokens=4&sampler=top-k:5,temperature:0.8&seed=3&autorun=1" >/dev/null
  [ -s "$SHOT" ] && echo "screenshot: $SHOT"
fi
[ $fails -eq 0 ] && echo "page tests passed"
[ $fails -eq 0 ]
