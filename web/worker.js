// glassbox's page (web/index.html): the Web Worker that runs the WebAssembly build. Each run is a fresh
// instance of glassbox-web.mjs (the same main as the command line, over an in-memory file system holding the
// embedded toy model), called with the arguments the page built (main ends the instance: EXIT_RUNTIME); it answers with stdout, stderr, the exit
// status and the trace file, so a failed run leaves nothing behind for the next one.
import createGlassbox from './glassbox-web.mjs';

let wasmBinary = null;  // fetched once; each run instantiates it anew

self.onmessage = async (event) => {
  const { id, args, files } = event.data;
  const out = [], err = [];
  try {
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
    let trace = null;
    const tracePath = args[args.indexOf('--trace') + 1];
    if (args.includes('--trace') && rc === 0) {
      // After main the runtime has exited (its streams closed, FS.readFile refuses): the file's bytes are
      // read from MEMFS's node directly.
      try {
        const node = mod.FS.lookupPath(tracePath).node;
        trace = new TextDecoder().decode(node.contents.subarray(0, node.usedBytes));
      } catch (e) { err.push(`glassbox (web): cannot read the trace ${tracePath}: ${e.message || e}`); }
    }
    self.postMessage({ id, rc, stdout: out.join('\n'), stderr: err.join('\n'), trace, ms });
  } catch (e) {
    self.postMessage({ id, rc: -1, stdout: out.join('\n'), stderr: err.concat([`glassbox (web): ${e && e.message ? e.message : e}`]).join('\n'), trace: null });
  }
};
