// Drives the page (build-web/index.html) in headless Chromium over the DevTools protocol, for
// tests/web/test-web-page.sh: opens a URL, optionally picks files in the page's file inputs and presses Run,
// waits (real time: the worker computes) until <body data-glassbox> says done or error, and prints one JSON
// object: the mark, #output's text, #status, the number of bars drawn, console errors, and a screenshot's path.
// Usage: node --experimental-websocket page-driver.mjs URL [--pick INPUT_ID=PATH]... [--run] [--screenshot FILE]
//        [--expect-error] (the page is to show an error on a picked file: waits for #status.error instead)
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const argv = process.argv.slice(2);
const url = argv.shift();
const picks = [];
let run = false, shot = null, expectError = false;
while (argv.length) {
  const a = argv.shift();
  if (a === '--pick') picks.push(argv.shift().split(/=(.*)/s).slice(0, 2));
  else if (a === '--run') run = true;
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
  if (run) { await evaluate("document.body.removeAttribute('data-glassbox'); document.getElementById('run').click(); true"); }
  let mark = null;
  for (let i = 0; i < 2000 && !mark; ++i) { await sleep(100); mark = await evaluate('document.body.dataset.glassbox || null'); }
  const r = await evaluate(`({output: document.getElementById('output').textContent, status: document.getElementById('status').textContent,
    bars: document.querySelectorAll('.row .bar').length, steps: document.querySelectorAll('.step').length,
    download: !document.getElementById('download').hidden, info: document.getElementById('model-info').textContent})`);
  if (shot) {
    await sleep(200);
    const { data } = await send('Page.captureScreenshot', { format: 'png', captureBeyondViewport: true });
    writeFileSync(shot, Buffer.from(data, 'base64'));
  }
  finish(0, { mark, ...r, consoleErrors, screenshot: shot });
}
