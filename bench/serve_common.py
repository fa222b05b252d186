"""What the serve benchmarks share: starting `glassbox serve --port 0` and learning its port."""
import re, subprocess, threading


def start_serve(cmd):
    """Starts `cmd` (a `glassbox serve ... --port 0` command line) and returns (process, port) once it says it is
    ready; its stderr is drained afterwards so that it never blocks on a full pipe."""
    p = subprocess.Popen(cmd, stderr=subprocess.PIPE, text=True)
    port = None
    for line in p.stderr:
        m = re.search(r"listening on http://127.0.0.1:(\d+)", line)
        if m:
            port = int(m.group(1))
        if "ready" in line and port:
            break
    if port is None:
        p.kill()
        raise SystemExit(f"{' '.join(cmd)}: the server never said where it listens (exit {p.wait()})")
    threading.Thread(target=lambda: [None for _ in p.stderr], daemon=True).start()
    return p, port
