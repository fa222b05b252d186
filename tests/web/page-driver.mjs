// Drives the page (build-web/index.html) in headless Chromium over the DevTools protocol, for
// tests/web/test-web-page.sh: opens a URL, optionally picks files in the page's file inputs, then does the
// actions in order: --run or --click ID (press it, then wait, in real time: the worker computes, until
// <body data-glassbox> is set again), --start ID (press it, do not wait), --pause-after N (wait until N steps are shown, press Pause, wait for
// data-glassbox="paused"), --set ID=VALUE (an input's value); with no action it waits for the mark the URL's autorun sets. It prints one JSON
// object: the mark, #output's text, #status, the steps and bars drawn, the tokens of the steps shown, the last
// step's logit-lens rows, held KV positions and attention cells, the attention matrix's rows, console errors, and a
// screenshot's path.
// Usage: node --experimental-websocket page-driver.mjs URL [--pick INPUT_ID=PATH]... [--run] [--click ID]...
//        [--start ID]... [--pause-after N] [--set INPUT_ID=VALUE]... [--screenshot FILE]
//        [--expect-error] (the page is to show an error on a picked file: waits for #status.error instead)
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const argv = process.argv.slice(2);
const url = argv.shift();
const picks = [];
const actions = [];
let shot = null, expectError = false;
while (argv.length) {
  const a = argv.shift();
  if (a === '--pick') picks.push(argv.shift().split(/=(.*)/s).slice(0, 2));
  else if (a === '--run') actions.push(['click', 'run']);
  else if (a === '--click') actions.push(['click', argv.shift()]);
  else if (a === '--start') actions.push(['start', argv.shift()]);
  else if (a === '--pause-after') actions.push(['pause', Number(argv.shift())]);
  else if (a === '--set') actions.push(['set', argv.shift().split(/=(.*)/s).slice(0, 2)]);
  else if (a === '--screenshot') shot = argv.shift();
  else if (a === '--expect-error') expectError = true;
  else { console.error(`page-driver: unknown argument ${a}`); process.exit(2); }
}

const profile = mkdtempSync(join(tmpdir(), 'gb-chrome-'));
const chrome = spawn('chromium', ['--headless=new', '--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage', '--no-first-run',
  `--user-data-dir=${profile}`, '--remote-debugging-port=0', '--window-size=1200,1400', 'about:blank'], { stdio: ['ignore', 'ignore', 'pipe'] });
const finish = (code, result) => {
  if (result) console.log(JSON.stringify(result));
  chrome.kill();
  setTimeout(() => { try { rmSync(profile, { recursive: true, force: true }); } catch {} process.exit(code); }, 300);
};
setTimeout(() => { console.log(JSON.stringify({ mark: 'timeout' })); finish(1); }, 240000);

const wsUrl = await new Promise((resolve, reject) => {
  let buf = '';
  chrome.stderr.on('data', (d) => {
    buf += d;
    const m = /DevTools listening on (ws:\/\/\S+)/.exec(buf);
    if (m) resolve(m[1]);
  });
  chrome.on('exit', (c) => reject(new Error(`chromium exited (${c}): ${buf.slice(-400)}`)));
});
const ws = new WebSocket(wsUrl);
await new Promise((r) => ws.addEventListener('open', r, { once: true }));
let nextId = 1;
const waiting = new Map();
const consoleErrors = [];
ws.addEventListener('message', (ev) => {
  const msg = JSON.parse(ev.data);
  if (msg.id && waiting.has(msg.id)) { waiting.get(msg.id)(msg); waiting.delete(msg.id); return; }
  if (msg.method === 'Runtime.exceptionThrown') consoleErrors.push(msg.params.exceptionDetails.exception?.description || msg.params.exceptionDetails.text);
  if (msg.method === 'Runtime.consoleAPICalled' && msg.params.type === 'error') consoleErrors.push(msg.params.args.map((a) => a.value ?? a.description).join(' '));
  if (msg.method === 'Log.entryAdded' && msg.params.entry.level === 'error') consoleErrors.push(`${msg.params.entry.text} ${msg.params.entry.url || ''}`);
});
let session;
const send = (method, params = {}) => new Promise((resolve, reject) => {
  const id = nextId++;
  waiting.set(id, (m) => (m.error ? reject(new Error(`${method}: ${m.error.message}`)) : resolve(m.result)));
  ws.send(JSON.stringify({ id, method, params, ...(session ? { sessionId: session } : {}) }));
});
const { targetId } = await send('Target.createTarget', { url: 'about:blank' });
({ sessionId: session } = await send('Target.attachToTarget', { targetId, flatten: true }));
await send('Runtime.enable'); await send('Log.enable'); await send('Page.enable'); await send('DOM.enable');
await send('Page.navigate', { url });
const evaluate = async (expr) => (await send('Runtime.evaluate', { expression: expr, returnByValue: true, awaitPromise: true })).result.value;
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
for (let i = 0; i < 100 && !(await evaluate("document.readyState === 'complete' && !!document.getElementById('run')")); ++i) await sleep(100);

for (const [inputId, path] of picks) {
  const { root } = await send('DOM.getDocument');
  const { nodeId } = await send('DOM.querySelector', { nodeId: root.nodeId, selector: `#${inputId}` });
  await send('DOM.setFileInputFiles', { nodeId, files: [path] });
  // The page reads the file and inspects it: wait for its answer (#model-info changes, or an error).
  for (let i = 0; i < 600; ++i) {
    await sleep(100);
    const s = await evaluate("document.getElementById('status').textContent");
    if (/model loaded|not a model|cannot|error/i.test(s) || inputId !== 'model-file') break;
  }
}
if (expectError) {
  const st = await evaluate("({cls: document.getElementById('status').className, text: document.getElementById('status').textContent, info: document.getElementById('model-info').textContent})");
  finish(0, { mark: st.cls === 'error' ? 'error-shown' : 'no-error', status: st.text, info: st.info, consoleErrors });
} else {
  const waitMark = async () => {
    let m = null;
    for (let i = 0; i < 2000 && !m; ++i) { await sleep(50); m = await evaluate('document.body.dataset.glassbox || null'); }
    return m;
  };
  let mark = null;
  for (const [what, arg] of actions) {
    if (what === 'click' || what === 'start') {
      await evaluate(`document.body.removeAttribute('data-glassbox'); document.getElementById(${JSON.stringify(arg)}).click(); true`);
      if (what === 'click') mark = await waitMark();
    } else if (what === 'set') {  // an input's value
      await evaluate(`document.getElementById(${JSON.stringify(arg[0])}).value = ${JSON.stringify(arg[1])}; true`);
    } else {  // pause after N steps
      for (let i = 0; i < 2000 && Number(await evaluate('document.body.dataset.steps || 0')) < arg; ++i) await sleep(5);
      await evaluate("document.getElementById('pause').click(); true");
      mark = await waitMark();
    }
  }
  if (!actions.length) mark = await waitMark();
  const r = await evaluate(`(() => { const steps = document.querySelectorAll('.step'), last = steps[steps.length - 1];
    return {output: document.getElementById('output').textContent, status: document.getElementById('status').textContent,
    bars: document.querySelectorAll('.row .bar').length, steps: steps.length, dataSteps: Number(document.body.dataset.steps),
    tokens: Array.from(steps, (s) => s.querySelector('h3 code').textContent),
    lensRows: last ? last.querySelectorAll('.lens-row').length : 0,
    kvHeld: last ? last.querySelectorAll('.kv-pos.held').length : 0,
    attn: last ? Array.from(last.querySelectorAll('.attn'), (d) => ({ layer: Number(d.dataset.layer), head: Number(d.dataset.head),
      sum: Number(d.dataset.sum), cells: Array.from(d.querySelectorAll('.attn-pos'), (c) => c.textContent) })) : [], kvTokens: last && last.querySelector('.kv') ? Number(last.querySelector('.kv').dataset.tokens) : null,
    matrix: Array.from(document.querySelectorAll('.attn-matrix'), (d) => ({ layer: Number(d.dataset.layer), head: Number(d.dataset.head),
      rows: Array.from(d.querySelectorAll('tr.attn-row'), (t) => ({ pos: Number(t.dataset.pos), sum: Number(t.dataset.sum),
        cells: Number(t.dataset.cells), shaded: t.querySelectorAll('td.attn-w').length, empty: t.querySelectorAll('td.attn-none').length })) })),
    pauseLabel: document.getElementById('pause').textContent,
    download: !document.getElementById('download').hidden, info: document.getElementById('model-info').textContent}; })()`);
  if (shot) {
    await sleep(200);
    const { data } = await send('Page.captureScreenshot', { format: 'png', captureBeyondViewport: true });
    writeFileSync(shot, Buffer.from(data, 'base64'));
  }
  finish(0, { mark, ...r, consoleErrors, screenshot: shot });
}
