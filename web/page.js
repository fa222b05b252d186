// glassbox's page (web/index.html): the controls → a `glassbox run` command line for the worker (worker.js),
// whose trace comes back line by line as each step ends → for each step the distribution the model gave and
// after each sampler stage, as bars with the token texts, the drawn token marked, the logit lens per layer,
// the KV cache and the attention of a chosen layer and head. Run, Step (one token more) and Pause/Resume (docs/web.md, "Step and pause").
// ?prompt=&max_tokens=&sampler=&seed=&pace=&ignore_eos=1&attention=L:H&model=URL&autorun=1 runs without clicks. The end of
// each run or step sets data-glassbox="done" on <body> ("paused" on a pause, "error" on a failure),
// data-steps the number of steps shown, and the generated text in #output.
const $ = (id) => document.getElementById(id);

// --- the worker: restarted to pause a run (main cannot stop between steps from outside) ---------------------
let worker = null, nextId = 1;
const pending = new Map();  // id → { resolve, onLine }
function startWorker() {
  worker = new Worker(new URL('./worker.js', import.meta.url), { type: 'module' });
  worker.onmessage = (e) => {
    const p = pending.get(e.data.id);
    if (!p) return;
    if (typeof e.data.line === 'string') { p.onLine?.(e.data.line); return; }
    pending.delete(e.data.id);
    p.resolve(e.data);
  };
  worker.onerror = (e) => { status(`the worker failed: ${e.message || e}`, true); };
}
function stopWorker() {
  worker.terminate();
  for (const [id, p] of pending) p.resolve({ id, rc: -2, stopped: true, stdout: '', stderr: '', trace: null });
  pending.clear();
  startWorker();
}
function call(message, onLine) {
  const id = nextId++;
  return new Promise((resolve) => { pending.set(id, { resolve, onLine }); worker.postMessage({ id, ...message }); });
}
startWorker();

function status(text, error = false) { const s = $('status'); s.textContent = text; s.className = error ? 'error' : ''; }

// --- the model: the embedded toy, a picked file, or a URL fetched in the worker ------------------------------
let model = null, tokenizer = null;
const ext = (name) => (/\.[A-Za-z0-9]+$/.exec(name) || [''])[0];
function modelFiles() {
  const files = [], args = [];
  if (model) { files.push({ path: '/model' + ext(model.name), data: model.data }); args.push('--model', '/model' + ext(model.name)); }
  if (model && tokenizer) { files.push({ path: '/tokenizer' + ext(tokenizer.name), data: tokenizer.data }); args.push('--tokenizer', '/tokenizer' + ext(tokenizer.name)); }
  return { files, args };
}

// `glassbox inspect` on a picked or fetched file: what it is, or the clear one-line error a file that is not a
// model (or is cut short) gets; then the toy is back in use, and the page says so.
async function describeModel() {
  if (!model) { $('model-info').textContent = 'the embedded toy model (models/toy: a tiny llama trained on weather sentences)'; return true; }
  const { files } = modelFiles();
  const r = await call({ args: ['inspect', '/model' + ext(model.name)], files });
  if (r.rc !== 0) {
    const why = (r.stderr.split('\n').find((l) => l.includes('error')) || r.stderr || 'not a model').replace('/model' + ext(model.name), model.name);
    $('model-info').textContent = `${model.name}: not usable — ${why}; the embedded toy is in use`;
    status(`${model.name} is not a model this build can run: ${why}`, true);
    model = null;
    $('model-file').value = '';
    return false;
  }
  const lines = r.stdout.split('\n').filter((l) => /arch|format|dim|layers|vocab|type|size|parameters/i.test(l)).slice(0, 8);
  $('model-info').textContent = `${model.name} (${(model.data.byteLength / 1048576).toFixed(1)} MiB): ${lines.join(' · ')}`;
  status('model loaded; press Run or Step');
  return true;
}

// A model from a URL (relative to the page, or absolute where its server allows this page to read it).
async function loadUrl(url) {
  let abs;
  try { abs = new URL(url, location.href).href; } catch { status(`${url}: not a URL`, true); return false; }
  status(`fetching ${abs}…`);
  const r = await call({ op: 'fetch', url: abs });
  if (r.stopped) { status(`the fetch of ${abs} was ended by Pause (the worker was restarted): fetch it again`, true); return false; }
  if (r.error) {
    model = null;
    $('model-info').textContent = `the embedded toy model (${abs} could not be fetched)`;
    status(r.error, true);
    return false;
  }
  model = { name: decodeURIComponent(new URL(abs).pathname.split('/').pop() || 'model'), data: r.data };
  $('model-file').value = '';
  return describeModel();
}

// --- drawing one step ------------------------------------------------------------------------------------
const shown = (text, id) => JSON.stringify(text ?? String(id)).slice(1, -1);
function bars(container, title, entries, picked, topN) {
  const div = document.createElement('div');
  div.className = 'stage';
  const h = document.createElement('h4');
  h.textContent = title;
  div.appendChild(h);
  for (const c of (entries || []).slice(0, topN)) {
    const row = document.createElement('div');
    row.className = 'row' + (c.id === picked ? ' pick' : '');
    const tok = document.createElement('span'); tok.className = 'tok'; tok.textContent = shown(c.text, c.id);
    const barBox = document.createElement('span');
    const bar = document.createElement('div'); bar.className = 'bar'; bar.style.width = `${Math.max(0.3, 100 * c.prob)}%`;
    barBox.appendChild(bar);
    const p = document.createElement('span'); p.className = 'p'; p.textContent = c.prob.toFixed(3);
    row.append(tok, barBox, p);
    div.appendChild(row);
  }
  container.appendChild(div);
}

// The logit lens of one step: per layer (after each block; after its attention too with `all`), the top
// tokens the output head would give there, the last layer's answer marked; the layer where the answer
// settles is the rule of `glassbox trace lens` and the trace viewer (cli/cmd_trace.cpp, lens_settles).
function lensSettles(lens) {
  const blocks = lens.filter((e) => !e.point && e.top && e.top.length).sort((a, b) => a.layer - b.layer);
  if (!blocks.length) return null;
  const answer = blocks[blocks.length - 1].top[0].id;
  let L = blocks[blocks.length - 1].layer;
  for (let k = blocks.length - 1; k >= 0 && blocks[k].top[0].id === answer; --k) L = blocks[k].layer;
  return L;
}
function drawLens(container, lens) {
  if (!lens || !lens.length) return;
  const div = document.createElement('div');
  div.className = 'lens';
  const settles = lensSettles(lens);
  const h = document.createElement('h4');
  h.textContent = `logit lens: the top tokens after each layer${settles === null ? '' : ` (the answer settles at layer ${settles})`}`;
  div.appendChild(h);
  const answer = lens.filter((e) => !e.point).sort((a, b) => b.layer - a.layer)[0]?.top?.[0]?.id;
  const table = document.createElement('table');
  // deepest first (the output at the top), attention before block within a layer
  const rows = lens.slice().sort((a, b) => b.layer - a.layer || (a.point === 'attn' ? 1 : 0) - (b.point === 'attn' ? 1 : 0));
  for (const e of rows) {
    const tr = document.createElement('tr');
    tr.className = 'lens-row';
    tr.dataset.layer = String(e.layer);
    const th = document.createElement('th'); th.textContent = `layer ${e.layer}${e.point ? ' ' + e.point : ''}`;
    tr.appendChild(th);
    for (const c of (e.top || []).slice(0, 4)) {
      const td = document.createElement('td');
      td.textContent = shown(c.text, c.id);
      const p = document.createElement('span'); p.className = 'p'; p.textContent = c.prob.toFixed(2);
      td.appendChild(p);
      const a = Math.max(0, Math.min(1, c.prob));
      td.style.background = `rgba(74,120,194,${(0.08 + 0.8 * a).toFixed(3)})`;
      if (a > 0.5) td.style.color = '#fff';
      if (c.id === answer) td.classList.add('answer');
      tr.appendChild(td);
    }
    table.appendChild(tr);
  }
  div.appendChild(table);
  container.appendChild(div);
}

// The KV cache after one step: a cell per position up to this one, held (filled) or not; the trace viewer's
// rule (traces/viewer/viewer.html, drawKvState): blocks for paged, held positions otherwise.
function drawKv(container, kv, pos) {
  if (!kv) return;
  const div = document.createElement('div');
  div.className = 'kv';
  div.dataset.tokens = String(kv.tokens);
  const h = document.createElement('h4');
  const first = kv.first_pos || 0;
  const mib = (b) => (b >= 1048576 ? `${(b / 1048576).toFixed(1)} MiB` : `${(b / 1024).toFixed(0)} KiB`);
  h.textContent = kv.block_size
    ? `KV cache (${kv.module}): ${kv.blocks_used} blocks used of ${kv.block_size} positions, ${kv.blocks_free} free; ${mib(kv.bytes)}`
    : kv.capacity
      ? `KV cache (${kv.module}): positions ${first}..${first + kv.tokens - 1} held, ${kv.tokens} of ${kv.capacity}; ${kv.evicted || 0} evicted; ${mib(kv.bytes)}`
      : `KV (${kv.module}): no cache, positions ${first}..${first + kv.tokens - 1} computed again this step`;
  div.appendChild(h);
  const strip = document.createElement('div');
  strip.className = 'kv-strip';
  const n = Math.max(pos + 1, first + kv.tokens);
  for (let p = 0; p < n; ++p) {
    const held = p >= first && p < first + kv.tokens;
    const c = document.createElement('span');
    c.className = held ? 'kv-pos held' : 'kv-pos';
    c.title = `position ${p}${held ? ' held' : ' not held'}`;
    strip.appendChild(c);
  }
  if (kv.capacity) {
    const free = document.createElement('span');
    free.className = 'kv-free';
    free.textContent = ` + ${Math.max(0, kv.capacity - n)} free`;
    strip.appendChild(free);
  }
  div.appendChild(strip);
  container.appendChild(div);
}

// The attention of the chosen layer and head at one step (--trace-attention L:H): the step's newest position
// attending to each position it holds, a cell per position with its token, shaded by its weight.
function drawAttention(container, records, texts) {
  for (const a of records || []) {
    const div = document.createElement('div');
    div.className = 'attn';
    div.dataset.layer = String(a.layer);
    div.dataset.head = String(a.head);
    div.dataset.sum = String(a.weights.reduce((x, y) => x + y, 0));
    const h = document.createElement('h4');
    const top = a.weights.reduce((m, w, i) => (w > a.weights[m] ? i : m), 0);
    h.textContent = `attention, layer ${a.layer} head ${a.head} (counted from 0): position ${a.pos} attends most to position ` +
      `${a.first_pos + top} (${a.weights[top].toFixed(2)})`;
    div.appendChild(h);
    a.weights.forEach((w, i) => {
      const p = a.first_pos + i;
      const c = document.createElement('span');
      c.className = 'attn-pos';
      c.textContent = texts(p);
      c.title = `position ${p}: weight ${w.toFixed(4)}`;
      c.style.background = `rgba(208,99,43,${(0.05 + 0.9 * Math.min(1, w)).toFixed(3)})`;
      if (w > 0.5) c.style.color = '#fff';
      div.appendChild(c);
    });
    container.appendChild(div);
  }
}

// The attention matrix of the chosen layer and head across the steps drawn so far (the trace viewer's view):
// a row per step's query position, a column per position it may attend to, each cell shaded by its weight;
// the causal mask leaves the upper triangle empty. Redrawn after each step.
function drawMatrix(steps, texts) {
  const box = $('attn-matrix');
  box.textContent = '';
  const heads = new Map();  // "layer:head" → [{pos, first_pos, weights}]
  for (const ev of steps)
    for (const a of ev.attention || []) {
      const key = `${a.layer}:${a.head}`;
      if (!heads.has(key)) heads.set(key, []);
      heads.get(key).push(a);
    }
  for (const [key, rows] of heads) {
    const [layer, head] = key.split(':');
    const last = Math.max(...rows.map((a) => a.pos));
    const div = document.createElement('div');
    div.className = 'attn-matrix';
    div.dataset.layer = layer;
    div.dataset.head = head;
    div.dataset.rows = String(rows.length);
    const h = document.createElement('h4');
    h.textContent = `attention across the steps, layer ${layer} head ${head}: a row per step (the position that attends), ` +
      `a column per position held; darker is more weight`;
    div.appendChild(h);
    const table = document.createElement('table');
    const head_row = table.insertRow();
    head_row.insertCell().textContent = '';
    for (let p = 0; p <= last; ++p) {
      const th = document.createElement('th');
      th.textContent = texts(p);
      th.title = `position ${p}`;
      head_row.appendChild(th);
    }
    for (const a of rows) {
      const tr = table.insertRow();
      tr.className = 'attn-row';
      tr.dataset.pos = String(a.pos);
      tr.dataset.sum = String(a.weights.reduce((x, y) => x + y, 0));
      tr.dataset.cells = String(a.weights.length);
      const label = tr.insertCell();
      label.className = 'attn-q';
      label.textContent = `${a.pos} ${texts(a.pos)}`;
      for (let p = 0; p <= last; ++p) {
        const td = tr.insertCell();
        const i = p - a.first_pos;
        if (i < 0 || i >= a.weights.length) { td.className = 'attn-none'; continue; }
        const w = a.weights[i];
        td.className = 'attn-w';
        td.title = `position ${a.pos} → ${p}: weight ${w.toFixed(4)}`;
        td.style.background = `rgba(208,99,43,${(0.03 + 0.95 * Math.min(1, w)).toFixed(3)})`;
      }
    }
    div.appendChild(table);
    box.appendChild(div);
  }
}

function drawStep(ev, topN, texts) {
  const picked = ev.token ? ev.token.id : -1;
  const box = document.createElement('div');
  box.className = 'step';
  box.dataset.step = String(ev.step);
  const h = document.createElement('h3');
  h.append(`step ${ev.step} (${ev.phase}, position ${ev.pos}): drew `);
  const code = document.createElement('code'); code.textContent = shown(ev.token ? ev.token.text : '');
  const u = ev.draw && typeof ev.draw.u === 'number' ? `, drawn with u = ${ev.draw.u.toFixed(3)}` : ' (no draw: the top token)';
  h.append(code, typeof ev.prob === 'number' ? ` — p = ${ev.prob.toFixed(3)} before the chain${u}` : u);
  box.appendChild(h);
  const row = document.createElement('div'); row.className = 'stages';
  bars(row, 'the model (softmax of the logits)', ev.top, picked, topN);
  for (const st of ev.stages || []) {
    const params = Object.entries(st.params || {}).map(([k, v]) => `${k}=${v}`).join(', ');
    bars(row, `after ${st.name}${params ? ' (' + params + ')' : ''}: ${st.kept} kept`, st.top, picked, topN);
  }
  box.appendChild(row);
  const inside = document.createElement('div'); inside.className = 'inside';
  drawLens(inside, ev.lens);
  drawKv(inside, ev.kv, ev.pos);
  drawAttention(inside, ev.attention, texts);
  if (inside.childNodes.length) box.appendChild(inside);
  return box;
}

// --- a generation: Run, Step, Pause/Resume ----------------------------------------------------------------
// gen: the run the controls described when it began (its command line without -n), the steps shown, and
// whether it has ended (a stop token, or max tokens). Step and Resume run the same command line again with
// -n (steps shown + 1, or max): the same tokens come first (seeded or greedy: the run is deterministic),
// checked against those shown, and only the new ones are drawn.
let gen = null, running = false, downloadUrl = null;
function newGen() {
  const prompt = $('prompt').value, max = Math.max(1, Number($('max-tokens').value) || 1);
  const sampler = $('sampler').value.trim() || 'default';
  const seed = $('seed').value, topN = Math.max(1, Math.min(50, Number($('top').value) || 8));
  const pace = Math.max(0, Number($('pace').value) || 0);
  const { files, args: modelArgs } = modelFiles();
  const args = ['run', ...modelArgs, '--prompt', prompt, '--sampler', sampler,
                '--trace', '/dev/gbtrace', '--trace-top', String(Math.max(topN, 10))];
  if (seed !== '') args.push('--seed', String(seed));
  if (pace > 0) args.push('--pace', String(pace));
  if ($('ignore-eos').checked) args.push('--ignore-eos');
  if ($('lens').checked) args.push('--trace-lens');
  const attention = $('attention').value.trim();
  if (attention) args.push('--trace-attention', attention);
  $('steps').textContent = '';
  $('attn-matrix').textContent = '';
  $('output').textContent = '';
  $('prompt-echo').textContent = prompt;
  return { args, files, max, topN, steps: [], finished: false, text: '', promptIds: null, pieces: null };
}
function setButtons() {
  $('run').disabled = running;
  $('step').disabled = running;
  $('pause').disabled = !running && !(gen && gen.paused && !gen.finished);
  $('pause').textContent = running || !(gen && gen.paused) ? 'Pause' : 'Resume';
  document.body.dataset.steps = String(gen ? gen.steps.length : 0);
}
function mark(m) { if (m) document.body.setAttribute('data-glassbox', m); else document.body.removeAttribute('data-glassbox'); }

// The token at a position: the prompt's from `glassbox tokenize --json` (when its ids are the run's), the
// generated ones from the steps; else its id.
function positionText(g, p) {
  const ids = g.promptIds || [];
  if (p < ids.length) return g.pieces && g.pieces.ids.length === ids.length && g.pieces.ids.every((x, i) => x === ids[i])
    ? shown(g.pieces.pieces[p]) : `#${ids[p]}`;
  const s = g.steps[p - ids.length];
  return s && s.token ? shown(s.token.text, s.token.id) : '?';
}
async function tokenizePrompt(g) {
  if (g.pieces || !$('attention').value.trim()) return;
  const args = ['tokenize', '--json'];
  if (model && /\.gguf$/i.test(model.name)) args.push('--model', '/model' + ext(model.name));
  else if (model && tokenizer) args.push('--tokenizer', '/tokenizer' + ext(tokenizer.name));
  const r = await call({ args: [...args, $('prompt').value], files: g.files });
  try { g.pieces = r.rc === 0 ? JSON.parse(r.stdout) : null; } catch { g.pieces = null; }
}

async function advance(target) {
  const g = gen;
  running = true;
  g.paused = false;
  g.pauseAsked = false;
  mark(null);
  setButtons();
  status(target > g.steps.length + 1 ? 'running…' : `step ${g.steps.length + 1}…`);
  await tokenizePrompt(g);
  if (gen !== g) return;
  let k = 0, summary = null, diverged = null;
  const before = g.steps.length;  // shown already: computed again, not drawn again
  const started = performance.now();
  const runSteps = () => call({ args: [...g.args, '-n', String(target)], files: g.files }, onLine);
  const onLine = (line) => {
    if (gen !== g || diverged) return;
    let ev;
    try { ev = JSON.parse(line); } catch (e) { diverged = `cannot read the trace: ${e.message}`; return; }
    if (ev.type === 'summary') summary = ev;
    if (ev.type === 'header') g.promptIds = ev.prompt_ids || [];
    if (ev.type !== 'step') return;
    if (k < g.steps.length) {  // a step already shown, computed again: it must be the same token
      if ((ev.token && ev.token.id) !== (g.steps[k].token && g.steps[k].token.id))
        diverged = `step ${k} drew another token on the way back (${shown(ev.token?.text)} instead of ${shown(g.steps[k].token?.text)}): this run is not deterministic`;
      ++k;
      return;
    }
    ++k;
    g.steps.push(ev);
    $('steps').appendChild(drawStep(ev, g.topN, (p) => positionText(g, p)));
    if (ev.attention && ev.attention.length) drawMatrix(g.steps, (p) => positionText(g, p));
    $('output').textContent += ev.token && ev.token.text !== undefined && !summary ? ev.token.text : '';
    document.body.dataset.steps = String(g.steps.length);
    const s = (performance.now() - started) / 1000;
    status(`running… ${g.steps.length} tokens, ${(k / Math.max(s, 1e-3)).toFixed(1)} tok/s in the page`);
  };
  // (a Pause pressed while the prompt was tokenized: the run is not started)
  const r = g.pauseAsked ? { rc: -2, stopped: true } : await runSteps();
  if (gen !== g) return;  // a new run began meanwhile
  running = false;
  if (r.stopped) {  // paused: what was drawn stays; Resume or Step go on from there
    g.paused = true;
    setButtons();
    status(`paused after ${g.steps.length} tokens: Resume, or Step one token`);
    mark('paused');
    return;
  }
  if (diverged || r.rc !== 0) {
    // glassbox's own error line (or the worker's), not the notes printed before it
    const lines = r.stderr.split('\n').filter((l) => l.trim());
    const why = diverged || lines.filter((l) => /error|cannot/.test(l)).pop() || lines.pop() || `exit status ${r.rc}`;
    status(`the run failed: ${why}`, true);
    g.finished = true;
    setButtons();
    mark('error');
    return;
  }
  $('output').textContent = r.stdout;  // the generated text alone (what `glassbox run` printed)
  g.finished = g.steps.length >= g.max || !summary || summary.generated < target;
  if (downloadUrl) URL.revokeObjectURL(downloadUrl);
  downloadUrl = URL.createObjectURL(new Blob([r.trace], { type: 'application/jsonl' }));
  const a = $('download'); a.href = downloadUrl; a.hidden = false;
  const num = (x, d) => (typeof x === 'number' ? x.toFixed(d) : '?');
  const speed = !summary ? '' : `; ${summary.generated} token${summary.generated === 1 ? '' : 's'}, TTFT ${num(summary.ttft_ms, 1)} ms` +
    (summary.generated > 1 ? `, decode ${num(summary.decode_tok_s, 0)} tok/s` : '') +
    (before > 0 ? ` (this run computed the ${before} token${before === 1 ? '' : 's'} shown before it again)` : '');
  const end = g.finished ? (summary && summary.stop_reason ? ` (stop: ${summary.stop_reason})` : '') : ': Step for one more, or Resume';
  status(`done in ${r.ms.toFixed(0)} ms${speed}${end}`);
  if (!g.finished) g.paused = true;
  setButtons();
  // Tests and teachers' links read #output, data-steps and this mark of the end.
  mark('done');
}

function run() { gen = newGen(); return advance(gen.max); }
function step() {
  if (!gen || gen.finished) gen = newGen();
  return advance(gen.steps.length + 1);
}
function pauseOrResume() {
  if (running) { gen.pauseAsked = true; stopWorker(); return; }
  if (gen && gen.paused && !gen.finished) advance(gen.max);
}
$('run').addEventListener('click', run);
$('step').addEventListener('click', step);
$('pause').addEventListener('click', pauseOrResume);

// A file the browser cannot read (moved, permissions, a path it refuses) is said on the page, and the
// model stays what it was said to be (never a silent run of another one).
async function pick(input, what) {
  const name = input.files && input.files[0] ? input.files[0].name : 'the file';
  const f = input.files && input.files[0];
  if (!f) return null;
  try { return { name: f.name, data: await f.arrayBuffer() }; } catch (e) {
    input.value = '';
    status(`${name}: the browser could not read this ${what} file (${e.name || 'error'}: ${e.message || e}); pick it again`, true);
    return undefined;
  }
}
$('model-file').addEventListener('change', async () => {
  const picked = await pick($('model-file'), 'model');
  if (picked === undefined) { model = null; $('model-info').textContent = 'the embedded toy model (the picked file could not be read)'; return; }
  model = picked;
  await describeModel();
});
$('tok-file').addEventListener('change', async () => { const picked = await pick($('tok-file'), 'tokenizer'); tokenizer = picked === undefined ? null : picked; });
// (data-glassbox: "ready" once the model is in use, "error" when it could not be)
$('use-toy').addEventListener('click', async () => {
  mark(null);
  model = null; tokenizer = null; $('model-file').value = ''; $('tok-file').value = ''; $('model-url').value = '';
  await describeModel();
  status('the embedded toy is in use; press Run or Step');
  mark('ready');
});
$('load-url').addEventListener('click', async () => {
  const url = $('model-url').value.trim();
  if (!url) return;
  mark(null);
  mark((await loadUrl(url)) ? 'ready' : 'error');
});
// A model file dropped anywhere on the page.
document.addEventListener('dragover', (e) => { e.preventDefault(); });
document.addEventListener('drop', async (e) => {
  e.preventDefault();
  const f = e.dataTransfer && e.dataTransfer.files && e.dataTransfer.files[0];
  if (!f) return;
  try { model = { name: f.name, data: await f.arrayBuffer() }; } catch (err) { status(`${f.name}: the browser could not read it (${err.message || err})`, true); return; }
  await describeModel();
});

const q = new URLSearchParams(location.search);
if (q.has('prompt')) $('prompt').value = q.get('prompt');
if (q.has('max_tokens')) $('max-tokens').value = q.get('max_tokens');
if (q.has('sampler')) $('sampler').value = q.get('sampler');
if (q.has('seed')) $('seed').value = q.get('seed');
if (q.has('pace')) $('pace').value = q.get('pace');
if (q.get('ignore_eos') === '1') $('ignore-eos').checked = true;
if (q.get('lens') === '0') $('lens').checked = false;
if (q.has('attention')) $('attention').value = q.get('attention');
setButtons();
status('ready: press Run or Step');
(async () => {
  if (q.has('model')) {
    $('model-url').value = q.get('model');
    // A model that cannot be had is an error on the page, and nothing runs in its place.
    if (!(await loadUrl(q.get('model')))) { mark('error'); return; }
  }
  if (q.get('autorun') === '1') run();
})();
