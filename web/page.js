// glassbox's page (web/index.html): the controls → a `glassbox run` command line for the worker (worker.js),
// then the trace it wrote → for each step the distribution the model gave and after each sampler stage, as
// bars with the token texts, the drawn token marked. ?prompt=&max_tokens=&sampler=&seed=&autorun=1 runs
// without clicks; the end of a run sets data-glassbox="done" on <body> and the generated text in #output.
const $ = (id) => document.getElementById(id);
const worker = new Worker(new URL('./worker.js', import.meta.url), { type: 'module' });
let nextId = 1;
const pending = new Map();
worker.onmessage = (e) => { const r = pending.get(e.data.id); pending.delete(e.data.id); if (r) r(e.data); };
worker.onerror = (e) => { status(`the worker failed: ${e.message || e}`, true); };
function call(args, files) {
  const id = nextId++;
  return new Promise((resolve) => { pending.set(id, resolve); worker.postMessage({ id, args, files }); });
}

function status(text, error = false) { const s = $('status'); s.textContent = text; s.className = error ? 'error' : ''; }

// The picked model (and tokenizer), read into memory here and written into the worker's file system per run.
let model = null, tokenizer = null;
async function readPicked(input) {
  const f = input.files && input.files[0];
  if (!f) return null;
  return { name: f.name, data: await f.arrayBuffer() };
}
const ext = (name) => (/\.[A-Za-z0-9]+$/.exec(name) || [''])[0];
function modelFiles() {
  const files = [], args = [];
  if (model) { files.push({ path: '/model' + ext(model.name), data: model.data }); args.push('--model', '/model' + ext(model.name)); }
  if (model && tokenizer) { files.push({ path: '/tokenizer' + ext(tokenizer.name), data: tokenizer.data }); args.push('--tokenizer', '/tokenizer' + ext(tokenizer.name)); }
  return { files, args };
}

// `glassbox inspect` on a picked file: what it is, or the clear one-line error a file that is not a model gets.
async function describeModel() {
  if (!model) { $('model-info').textContent = 'the embedded toy model (models/toy: a tiny llama trained on weather sentences)'; return true; }
  const { files } = modelFiles();
  const r = await call(['inspect', '/model' + ext(model.name)], files);
  if (r.rc !== 0) {
    const why = (r.stderr.split('\n').find((l) => l.includes('error')) || r.stderr || 'not a model').replace('/model' + ext(model.name), model.name);
    $('model-info').textContent = `${model.name}: not usable — ${why}`;
    status(`${model.name} is not a model this build can run: ${why}`, true);
    model = null;
    $('model-file').value = '';
    return false;
  }
  const lines = r.stdout.split('\n').filter((l) => /arch|format|dim|layers|vocab|type|size|parameters/i.test(l)).slice(0, 8);
  $('model-info').textContent = `${model.name} (${(model.data.byteLength / 1048576).toFixed(1)} MiB): ${lines.join(' · ')}`;
  status('model loaded; press Run');
  return true;
}

function bars(container, title, entries, picked, topN) {
  const div = document.createElement('div');
  div.className = 'stage';
  const h = document.createElement('h4');
  h.textContent = title;
  div.appendChild(h);
  for (const c of (entries || []).slice(0, topN)) {
    const row = document.createElement('div');
    row.className = 'row' + (c.id === picked ? ' pick' : '');
    const tok = document.createElement('span'); tok.className = 'tok'; tok.textContent = JSON.stringify(c.text ?? String(c.id)).slice(1, -1);
    const barBox = document.createElement('span');
    const bar = document.createElement('div'); bar.className = 'bar'; bar.style.width = `${Math.max(0.3, 100 * c.prob)}%`;
    barBox.appendChild(bar);
    const p = document.createElement('span'); p.className = 'p'; p.textContent = c.prob.toFixed(3);
    row.append(tok, barBox, p);
    div.appendChild(row);
  }
  container.appendChild(div);
}

function drawTrace(text, topN) {
  const steps = $('steps');
  steps.textContent = '';
  const lines = text.split('\n').filter((l) => l.trim());
  let summary = null;
  for (const line of lines) {
    const ev = JSON.parse(line);
    if (ev.type === 'summary') summary = ev;
    if (ev.type !== 'step') continue;
    const picked = ev.token ? ev.token.id : -1;
    const box = document.createElement('div');
    box.className = 'step';
    const h = document.createElement('h3');
    h.append(`step ${ev.step} (${ev.phase}, position ${ev.pos}): drew `);
    const code = document.createElement('code'); code.textContent = JSON.stringify(ev.token ? ev.token.text : '').slice(1, -1);
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
    steps.appendChild(box);
  }
  return summary;
}

let downloadUrl = null;
async function run() {
  document.body.removeAttribute('data-glassbox');
  $('run').disabled = true;
  const prompt = $('prompt').value, maxTokens = $('max-tokens').value, sampler = $('sampler').value.trim() || 'default';
  const seed = $('seed').value, topN = Math.max(1, Math.min(50, Number($('top').value) || 8));
  const { files, args: modelArgs } = modelFiles();
  const args = ['run', ...modelArgs, '--prompt', prompt, '-n', String(maxTokens), '--sampler', sampler,
                '--trace', '/trace.jsonl', '--trace-top', String(Math.max(topN, 10))];
  if (seed !== '') args.push('--seed', String(seed));
  status('running…');
  $('output').textContent = '';
  $('prompt-echo').textContent = '';
  const r = await call(args, files);
  $('run').disabled = false;
  if (r.rc !== 0 || !r.trace) {
    // glassbox's own error line (or the worker's), not the notes printed before it
    const lines = r.stderr.split('\n').filter((l) => l.trim());
    const why = lines.filter((l) => /error|cannot/.test(l)).pop() || lines.pop() || `exit status ${r.rc}`;
    status(`the run failed: ${why}`, true);
    document.body.setAttribute('data-glassbox', 'error');
    return;
  }
  $('prompt-echo').textContent = prompt;
  const out = $('output');
  out.textContent = r.stdout;  // the generated text alone (what `glassbox run` printed)
  let summary = null;
  try { summary = drawTrace(r.trace, topN); } catch (e) { status(`cannot read the trace: ${e.message}`, true); }
  if (downloadUrl) URL.revokeObjectURL(downloadUrl);
  downloadUrl = URL.createObjectURL(new Blob([r.trace], { type: 'application/jsonl' }));
  const a = $('download'); a.href = downloadUrl; a.hidden = false;
  const num = (x, d) => (typeof x === 'number' ? x.toFixed(d) : '?');
  const speed = summary ? `; ${summary.generated} tokens, TTFT ${num(summary.ttft_ms, 1)} ms, decode ${num(summary.decode_tok_s, 0)} tok/s` : '';
  if ($('status').className !== 'error') status(`done in ${r.ms.toFixed(0)} ms${speed}`);
  // Tests and teachers' links read #output and this mark of the end.
  document.body.setAttribute('data-glassbox', 'done');
}

$('run').addEventListener('click', run);
// A file the browser cannot read (moved, permissions, a path it refuses) is said on the page, and the
// model stays what it was said to be (never a silent run of another one).
async function pick(input, what) {
  const name = input.files && input.files[0] ? input.files[0].name : 'the file';
  try { return await readPicked(input); } catch (e) {
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
$('use-toy').addEventListener('click', async () => { model = null; tokenizer = null; $('model-file').value = ''; $('tok-file').value = ''; await describeModel(); });

const q = new URLSearchParams(location.search);
if (q.has('prompt')) $('prompt').value = q.get('prompt');
if (q.has('max_tokens')) $('max-tokens').value = q.get('max_tokens');
if (q.has('sampler')) $('sampler').value = q.get('sampler');
if (q.has('seed')) $('seed').value = q.get('seed');
status('ready: press Run');
if (q.get('autorun') === '1') run();
