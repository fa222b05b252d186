#!/usr/bin/env python3
# Two `glassbox serve` replicas behind nginx on 127.0.0.1 (tools/serve-replicas.sh, docs/serve.md "Several
# replicas", issue #41): requests through nginx land on both replicas, every trace_url is served through
# nginx and by each replica (the trace folder is shared) and validates, a stream passes through the proxy,
# and a malformed or ../ trace id is still refused. Skips (SKIP:) when nginx or curl is not installed.
# Usage: test_serve_replicas.py GLASSBOX_BINARY SOURCE_DIR
import http.client
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request


def fail(msg):
    print("FAIL: " + msg, flush=True)
    sys.exit(1)


def get(port, path):
    # http.client, not urllib: the path goes out as written (no ../ folding, no quoting).
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    c.request("GET", path)
    r = c.getresponse()
    body = r.read()
    c.close()
    return r.status, body


def post(port, path, body):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    c.request("POST", path, json.dumps(body), {"Content-Type": "application/json"})
    r = c.getresponse()
    return r, c


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def main():
    glassbox, src = sys.argv[1], sys.argv[2]
    nginx = shutil.which("nginx") or ("/usr/sbin/nginx" if os.access("/usr/sbin/nginx", os.X_OK) else None)
    if not nginx:
        print("SKIP: nginx is not installed (Debian: apt-get install nginx; .ci/run installs it)")
        return 0
    if not shutil.which("curl"):
        print("SKIP: curl is not installed (tools/serve-replicas.sh checks readiness with it)")
        return 0
    work = tempfile.mkdtemp(prefix="glassbox-test-replicas-")
    traces = os.path.join(work, "traces")
    ready = os.path.join(work, "ready")
    port = free_port()
    log = open(os.path.join(work, "serve-replicas.log"), "w")
    proc = subprocess.Popen([os.path.join(src, "tools", "serve-replicas.sh"), "--replicas", "2", "--port", str(port),
                             "--glassbox", glassbox, "--trace-dir", traces, "--ready-file", ready, "--",
                             "--threads", "1", "--parallel", "2"],
                            stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    ports = []
    try:
        rc = run(glassbox, proc, port, traces, ready, work, ports)
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
        log.close()
        with open(os.path.join(work, "serve-replicas.log")) as f:
            text = f.read()
        print(text[-3000:])
        shutil.rmtree(work, ignore_errors=True)
    # The script stopped what it started: nothing answers on nginx's port or the replicas' any more.
    for p in ports:
        try:
            socket.create_connection(("127.0.0.1", p), timeout=2).close()
            fail("port %d still answers after tools/serve-replicas.sh was stopped" % p)
        except OSError:
            pass
    print("SIGTERM stopped nginx and both replicas")
    return rc


def run(glassbox, proc, port, traces, ready, work, ports):
    deadline = time.time() + 120
    while not os.path.exists(ready):
        if proc.poll() is not None:
            fail("tools/serve-replicas.sh exited with %d before it was ready" % proc.returncode)
        if time.time() > deadline:
            fail("tools/serve-replicas.sh not ready in 120 s")
        time.sleep(0.1)
    time.sleep(0.1)  # (the file is copied whole, but give the copy its moment)
    replicas = []
    with open(ready) as f:
        for line in f:
            parts = line.split()
            if parts[0] == "replica":
                replicas.append(int(parts[2].rsplit(":", 1)[1]))
    if len(replicas) != 2:
        fail("expected 2 replicas in the ready file, got %r" % replicas)
    ports += [port] + replicas
    print("nginx on %d, replicas on %r" % (port, replicas))

    # Non-streamed requests through nginx, of every API.
    urls = []
    for i in range(6):
        path, body = [("/completion", {"prompt": "Once upon a time", "n_predict": 6, "seed": i, "trace": "full"}),
                      ("/v1/completions", {"prompt": "The bird", "max_tokens": 5, "seed": i}),
                      ("/v1/chat/completions", {"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 5, "seed": i})][i % 3]
        r, c = post(port, path, body)
        data = r.read()
        c.close()
        if r.status != 200:
            fail("%s through nginx: %d %s" % (path, r.status, data[:300]))
        urls.append(json.loads(data)["glassbox"]["trace_url"])

    # A stream through nginx: several events, each as the replica sent it, then [DONE].
    r, c = post(port, "/v1/chat/completions", {"messages": [{"role": "user", "content": "Tell me a story."}],
                                               "max_tokens": 8, "seed": 7, "stream": True})
    if r.status != 200 or not r.getheader("Content-Type", "").startswith("text/event-stream"):
        fail("streamed chat through nginx: %d %s" % (r.status, r.getheader("Content-Type")))
    events = []
    for raw in r:
        line = raw.decode().strip()
        if line.startswith("data: "):
            events.append(line[6:])
    c.close()
    if len(events) < 3 or events[-1] != "[DONE]":
        fail("streamed chat through nginx: %d events, last %r" % (len(events), events[-1:] and events[-1]))
    last = json.loads(events[-2])
    urls.append(last["glassbox"]["trace_url"])
    print("%d requests through nginx (one streamed, %d events)" % (len(urls), len(events)))

    # They landed on both replicas: each one's own /metrics counts some, and the ids carry both tags.
    counts = []
    for p in replicas:
        status, body = get(p, "/metrics")
        total = [float(l.split()[-1]) for l in body.decode().splitlines() if l.startswith("glassbox:requests_total")]
        counts.append(int(total[0]) if total else 0)
    print("requests per replica (their /metrics):", counts)
    if sum(counts) != len(urls) or min(counts) == 0:
        fail("expected the %d requests spread over both replicas, got %r" % (len(urls), counts))

    # Every trace: through nginx (whichever replica answers) and from each replica directly, the same
    # complete file, which `glassbox trace validate` accepts; its viewer page too.
    for u in urls:
        status, text = get(port, u)
        if status != 200:
            fail("GET %s through nginx: %d %s" % (u, status, text[:300]))
        for p in replicas:
            s2, t2 = get(p, u)
            if s2 != 200 or t2 != text:
                fail("GET %s from the replica on %d: %d (%d bytes, %d through nginx)" % (u, p, s2, len(t2), len(text)))
        path = os.path.join(work, u.split("/")[-1] + ".jsonl")
        with open(path, "wb") as f:
            f.write(text)
        v = subprocess.run([glassbox, "trace", "validate", path], capture_output=True, text=True)
        if v.returncode != 0:
            fail("trace %s does not validate: %s%s" % (u, v.stdout, v.stderr))
        status, page = get(port, u + "/view")
        if status != 200 or b"<html" not in page.lower():
            fail("GET %s/view through nginx: %d" % (u, status))
    print("%d traces fetched through nginx and from both replicas, all valid" % len(urls))
    # Each replica's ids start with its own tag (TAG-N-RANDOM): no two replicas pick the same name.
    tags = {u.split("/")[-1].split("-")[0] for u in urls}
    if len(tags) != 2:
        fail("expected trace ids of two replicas' tags, got %r" % sorted(tags))

    # Still refused: names not of a trace's form, a file planted under such a name, a way out of the folder.
    with open(os.path.join(traces, "planted.jsonl"), "w") as f:
        f.write('{"secret": 1}\n')
    tag, n, rand = urls[0].split("/")[-1].split("-")
    for p in replicas + [port]:
        for bad in ["/traces/planted", "/traces/" + tag + "-" + n, "/traces/" + tag + "x-" + n + "-" + rand,
                    "/traces/" + tag + "-" + n + "-" + rand + "x", "/traces/../traces/" + tag + "-" + n + "-" + rand,
                    "/traces/..%2F" + tag + "-" + n + "-" + rand, "/traces/%2E%2E-1-abcdefgh"]:
            status, body = get(p, bad)
            if status not in (400, 404):
                fail("GET %s on %d: %d (expected 404) %s" % (bad, p, status, body[:200]))
    print("malformed and ../ ids refused")
    return 0


if __name__ == "__main__":
    sys.exit(main())
