// glassbox's page (web/index.html): the Web Worker that runs the WebAssembly build. Each run is a fresh
// instance of glassbox-web.mjs (the same main as the command line, over an in-memory file system holding the
// embedded toy model), called with the arguments the page built (main ends the instance: EXIT_RUNTIME); it answers with stdout, stderr, the exit
// status and the trace, so a failed run leaves nothing behind for the next one.
// The trace goes to /dev/gbtrace, a character device whose writes come here: the trace writer writes a device in
// place, line by line as each step ends (the web build has no writer thread), and each line is posted to the
// page at once ({id, line}), so the page shows each token as it is drawn. The page pauses a run by ending this
// worker (main runs to its end once called: there is no waiting inside it), and resumes or steps by running
// again: a seeded or greedy run draws the same tokens again (docs/web.md, "Step and pause").
// {op: 'fetch', url} fetches a model file here (a URL the page was given) and hands its bytes to the page.
import createGlassbox from './glassbox-web.mjs';

let wasmBinary = null;  // fetched once; each run instantiates it anew
const kTraceDevice = '/dev/gbtrace';

// A URL → its bytes, or the one-line reason it could not be had. A body shorter than its Content-Length
// (a cut connection) is said as such; what the bytes are is for `glassbox inspect` to say.
async function fetchModel(url) {
  let r;
  try { r = await fetch(url); } catch (e) {
    return { error: `cannot fetch ${url}: ${e && e.message ? e.message : e} (a network error, or a server that does not allow this page to read it: CORS)` };
  }
  if (!r.ok) return { error: `cannot fetch ${url}: HTTP ${r.status}${r.statusText ? ' ' + r.statusText : ''}` };
  let data;
  try { data = await r.arrayBuffer(); } catch (e) {
    return { error: `cannot fetch ${url}: the download broke off (${e && e.message ? e.message : e})` };
  }
  const declared = Number(r.headers.get('content-length'));
  const encoded = r.headers.get('content-encoding');
  if (!encoded && declared > 0 && data.byteLength < declared)
    return { error: `cannot fetch ${url}: got ${data.byteLength} of its ${declared} bytes (the download broke off)` };
  if (data.byteLength === 0) return { error: `${url}: the server sent an empty file` };
  return { data };
}

async function runMain({ id, args, files }) {
  const out = [], err = [], lines = [];
  if (!wasmBinary) {
    const r = await fetch(new URL('./glassbox-web.wasm', import.meta.url));
    if (!r.ok) throw new Error(`cannot fetch glassbox-web.wasm: HTTP ${r.status}`);
    wasmBinary = new Uint8Array(await r.arrayBuffer());
  }
  const mod = await createGlassbox({
    wasmBinary,
    noInitialRun: true,
    print: (s) => out.push(s),
    printErr: (s) => err.push(s),
  });
  for (const f of files || []) mod.FS.writeFile(f.path, new Uint8Array(f.data));
  // The trace device: bytes gathered into lines, each posted as it is complete.
  let partial = [];
  const decoder = new TextDecoder();
  const dev = mod.FS.makedev(64, 0);
  mod.FS.registerDevice(dev, {
    open() {}, close() {},
    write(stream, buffer, offset, length) {
      let from = offset;
      const end = offset + length;
      for (let i = offset; i < end; ++i) {
        if (buffer[i] !== 10) continue;
        partial.push(buffer.slice(from, i));
        let bytes = partial[0];
        if (partial.length > 1) {
          bytes = new Uint8Array(partial.reduce((n, p) => n + p.length, 0));
          partial.reduce((at, p) => (bytes.set(p, at), at + p.length), 0);
        }
        partial = [];
        const line = decoder.decode(bytes);
        lines.push(line);
        self.postMessage({ id, line });
        from = i + 1;
      }
      if (from < end) partial.push(buffer.slice(from, end));
      return length;
    },
  });
  mod.FS.mkdev(kTraceDevice, dev);
  let rc;
  const started = performance.now();
  try {
    rc = mod.callMain(args);
  } catch (e) {
    // exit() from C++ arrives as an ExitStatus; anything else is a crash of the module (said as such).
    if (e && e.name === 'ExitStatus') rc = e.status;
    else throw e;
  }
  const ms = performance.now() - started;
  const trace = args.includes('--trace') && rc === 0 ? lines.join('\n') + '\n' : null;
  return { id, rc, stdout: out.join('\n'), stderr: err.join('\n'), trace, ms };
}

self.onmessage = async (event) => {
  const { id } = event.data;
  if (event.data.op === 'fetch') {
    const r = await fetchModel(event.data.url);
    self.postMessage({ id, ...r }, r.data ? [r.data] : []);
    return;
  }
  try {
    self.postMessage(await runMain(event.data));
  } catch (e) {
    self.postMessage({ id, rc: -1, stdout: '', stderr: `glassbox (web): ${e && e.message ? e.message : e}`, trace: null });
  }
};
