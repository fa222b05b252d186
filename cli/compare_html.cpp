// `glassbox compare --html`: one self-contained page (no network, no external script) with the report
// embedded as JSON: the strategies' metrics, two charts, and the samples side by side with links to traces.
#include <filesystem>
#include <string_view>

#include "compare.hpp"
#include "glassbox/error.hpp"
#include "glassbox/traces/writer.hpp"

namespace fs = std::filesystem;
using nlohmann::json;

namespace glassbox::cli::compare {

namespace {

constexpr int kShownSamples = 20;  // per prompt and strategy; the JSON report has them all
constexpr std::string_view kPlaceholder = "@GLASSBOX_COMPARE_JSON@";

// The page. Colours and layout follow the trace viewer (traces/viewer/viewer.html).
constexpr const char* kPage = R"glassbox_compare(<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>glassbox compare</title>
<script>
// Collect every error and console.error before anything else runs, and show them in the page
// (#console-errors, data-count), so that a headless browser test can read them from the DOM.
(function () {
  var errors = [];
  function flush() {
    var box = document.getElementById('console-errors');
    if (!box) return;
    var ul = box.querySelector('ul');
    ul.textContent = '';
    errors.forEach(function (m) { var li = document.createElement('li'); li.textContent = m; ul.appendChild(li); });
    box.setAttribute('data-count', String(errors.length));
    box.hidden = errors.length === 0;
  }
  function record(msg) { errors.push(String(msg)); flush(); }
  document.addEventListener('DOMContentLoaded', flush);
  window.addEventListener('error', function (e) { record('error: ' + (e.message || e.type)); });
  window.addEventListener('unhandledrejection', function (e) { record('unhandled rejection: ' + e.reason); });
  var orig = console.error;
  console.error = function () { record(Array.prototype.map.call(arguments, String).join(' ')); return orig.apply(console, arguments); };
})();
</script>
<style>
  :root { --ink: #1d2330; --muted: #6b7280; --line: #d9dee7; --panel: #fff; --bg: #f4f6fa; --hl: #ffe28a; }
  * { box-sizing: border-box; }
  body { margin: 0; font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Helvetica, Arial, sans-serif; color: var(--ink); background: var(--bg); }
  header { padding: 10px 18px; background: var(--ink); color: #fff; display: flex; gap: 18px; align-items: baseline; flex-wrap: wrap; }
  header h1 { font-size: 16px; margin: 0; font-weight: 600; }
  header .meta { color: #c5cbd6; font-size: 12.5px; }
  main { display: grid; grid-template-columns: 1fr 1fr; gap: 12px; padding: 12px 18px; }
  section { background: var(--panel); border: 1px solid var(--line); border-radius: 8px; padding: 10px 12px; min-width: 0; }
  section h2 { margin: 0 0 6px; font-size: 12px; font-weight: 600; text-transform: uppercase; letter-spacing: .06em; color: var(--muted); }
  .wide { grid-column: 1 / -1; }
  #console-errors { background: #fdecea; border-color: #f5c2bd; margin: 12px 18px 0; }
  table { border-collapse: collapse; width: 100%; font-size: 12.5px; }
  th, td { border-bottom: 1px solid var(--line); padding: 3px 6px; text-align: right; vertical-align: top; }
  th:first-child, td:first-child { text-align: left; }
  th { color: var(--muted); font-weight: 600; }
  .sd { color: var(--muted); font-size: 11px; }
  .swatch { display: inline-block; width: 10px; height: 10px; border-radius: 2px; margin-right: 5px; }
  svg text { font-size: 11px; fill: var(--muted); }
  .legend { font-size: 12px; display: flex; gap: 14px; flex-wrap: wrap; }
  table.samples td, table.samples th { text-align: left; }
  .sample { font-family: ui-monospace, "SFMono-Regular", Menlo, monospace; font-size: 12px; white-space: pre-wrap; word-break: break-word; }
  .prompt-text { color: var(--muted); }
  .tok.shared { color: #59606e; }
  .tok.diverge { background: var(--hl); border-radius: 2px; outline: 1px solid #e0b400; }
  .tok.after { color: var(--ink); }
  .sample-foot { font-size: 11px; color: var(--muted); margin-top: 3px; }
  .sample-foot a { margin-right: 8px; }
  details code { display: block; font-size: 11px; white-space: pre-wrap; word-break: break-all; background: var(--bg); padding: 3px 5px; border-radius: 4px; }
  .note { color: var(--muted); font-size: 12px; }
</style>
</head>
<body>
<header><h1>glassbox compare</h1><span class="meta" id="meta"></span></header>
<section id="console-errors" data-count="0" hidden><h2>Errors in this page</h2><ul></ul></section>
<main>
  <section class="wide"><h2>By strategy (mean ± sd)</h2><table id="summary"></table>
    <p class="note">distinct: distinct continuations per prompt · distinct-n: unique n-grams / all n-grams across a prompt's samples ·
    rep-4: repeated 4-gram share in a sample · loop: longest repeated span (tokens) · H model / H chain: mean entropy (nats) of the
    model's distribution / of the distribution drawn from · logprob: mean log p per token under the model · ppl = exp(−mean log p) over all the tokens.
    Definitions: docs/compare.md.</p></section>
  <section><h2>Diversity against model log-probability</h2><svg id="chart-tradeoff" width="100%" height="280" viewBox="0 0 520 280"></svg>
    <div class="legend" id="legend-tradeoff"></div>
    <p class="note">One small dot per prompt, one large per strategy (its mean). Up: more diverse (distinct-2); right: more likely under the model.</p></section>
  <section><h2>Entropy per step</h2><svg id="chart-entropy" width="100%" height="280" viewBox="0 0 520 280"></svg>
    <div class="legend" id="legend-entropy"></div>
    <p class="note">Solid: the model's distribution; dashed: the distribution the chain drew from (0 for an argmax). Mean over the runs that reached the step.</p></section>
  <div id="prompts" class="wide"></div>
</main>
<script type="application/json" id="compare-data">@GLASSBOX_COMPARE_JSON@</script>
<script>
(function () {
  'use strict';
  var D = JSON.parse(document.getElementById('compare-data').textContent);
  var E = D.experiment, S = E.strategies.length, N = E.samples;
  var COLORS = ['#1f4e9c', '#d9822b', '#2f8a4c', '#b03a48', '#7b4fb3', '#0f8b8d', '#8c6d1f', '#5b6070'];
  function color(s) { return COLORS[s % COLORS.length]; }
  function el(tag, attrs, text) {
    var e = document.createElement(tag);
    if (attrs) Object.keys(attrs).forEach(function (k) { e.setAttribute(k, attrs[k]); });
    if (text !== undefined) e.textContent = text;
    return e;
  }
  function svg(tag, attrs) {
    var e = document.createElementNS('http://www.w3.org/2000/svg', tag);
    Object.keys(attrs).forEach(function (k) { e.setAttribute(k, attrs[k]); });
    return e;
  }
  function fmt(x, d) { return (typeof x === 'number' && isFinite(x)) ? x.toFixed(d) : '—'; }
  function pm(st, d) {
    var span = el('span');
    span.appendChild(document.createTextNode(fmt(st.mean, d)));
    span.appendChild(el('span', {'class': 'sd'}, ' ± ' + fmt(st.sd, d)));
    return span;
  }
  function stops(o) { return Object.keys(o).map(function (k) { return k + ' ' + o[k]; }).join(', '); }
  function swatch(s) { var sw = el('span', {'class': 'swatch'}); sw.style.background = color(s); return sw; }

  document.getElementById('meta').textContent =
    (E.model || 'embedded toy model') + ' · ' + E.prompts.length + ' prompt(s) × ' + S + ' strategies × ' + N +
    ' samples · at most ' + E.max_tokens + ' tokens · seed ' + E.seed_text;

  var COLS = [['distinct', 2], ['distinct_1', 3], ['distinct_2', 3], ['distinct_3', 3], ['rep_4', 3], ['loop', 1],
              ['entropy', 3], ['chain_entropy', 3], ['logprob', 3], ['perplexity_pooled', 2], ['length', 1]];
  var HEADS = ['distinct', 'distinct-1', 'distinct-2', 'distinct-3', 'rep-4', 'loop', 'H model', 'H chain', 'logprob', 'ppl', 'length', 'stops'];
  function specific(st) {
    var parts = [];
    if (st.beam) parts.push('beam ' + st.beam.width + ': ' + fmt(st.beam.forwards_per_step, 2) + ' forwards/step');
    if (st.speculative) parts.push('K=' + st.speculative.k + ': ' + fmt(100 * st.speculative.acceptance_rate, 1) + '% accepted, ' +
                                   fmt(st.speculative.tokens_per_target_forward, 2) + ' tokens/target forward');
    if (st.grammar) parts.push('grammar removed ' + fmt(st.grammar.removed_mass_per_step, 3) + ' of the mass per step');
    return parts.join('; ');
  }
  (function summary() {
    var t = document.getElementById('summary');
    var tr = el('tr');
    // What only some strategies have (docs/compare.md): a column only when one of them has it.
    var anySpecific = D.strategies.some(function (st) { return st.beam || st.speculative || st.grammar; });
    ['strategy', 'chain'].concat(HEADS).concat(anySpecific ? ['specific'] : []).forEach(function (h) { tr.appendChild(el('th', null, h)); });
    t.appendChild(tr);
    D.strategies.forEach(function (st, s) {
      var row = el('tr', {'class': 'strategy-row'});
      var name = el('td'); name.appendChild(swatch(s)); name.appendChild(document.createTextNode(st.label)); row.appendChild(name);
      row.appendChild(el('td', null, st.chain));
      COLS.forEach(function (c) {
        var v = st[c[0]], td = el('td');
        if (typeof v === 'number') td.textContent = fmt(v, c[1]); else td.appendChild(pm(v, c[1]));
        row.appendChild(td);
      });
      row.appendChild(el('td', null, stops(st.stop_reasons)));
      if (anySpecific) row.appendChild(el('td', {'class': 'specific'}, specific(st)));
      t.appendChild(row);
    });
  })();

  function legend(id, extra) {
    var box = document.getElementById(id);
    E.strategies.forEach(function (st, s) {
      var item = el('span'); item.appendChild(swatch(s)); item.appendChild(document.createTextNode(st.label)); box.appendChild(item);
    });
    if (extra) box.appendChild(el('span', null, extra));
  }
  // Axes in a 520×280 box; returns the scale functions.
  function axes(g, xmin, xmax, ymin, ymax, xlabel, ylabel, pad) {
    var L = 52, R = 510, T = 12, B = 240;
    if (!(xmax > xmin)) { xmin -= 0.5; xmax += 0.5; }
    if (!(ymax > ymin)) { ymin -= 0.5; ymax += 0.5; }
    var padx = pad ? (xmax - xmin) * 0.06 : 0, pady = pad ? (ymax - ymin) * 0.06 : 0;
    xmin -= padx; xmax += padx; ymin -= pady; ymax += pady;
    function X(x) { return L + (x - xmin) / (xmax - xmin) * (R - L); }
    function Y(y) { return B - (y - ymin) / (ymax - ymin) * (B - T); }
    g.appendChild(svg('line', {x1: L, y1: B, x2: R, y2: B, stroke: '#9aa3b2'}));
    g.appendChild(svg('line', {x1: L, y1: T, x2: L, y2: B, stroke: '#9aa3b2'}));
    for (var i = 0; i <= 4; ++i) {
      var xv = xmin + (xmax - xmin) * i / 4, yv = ymin + (ymax - ymin) * i / 4;
      var tx = svg('text', {x: X(xv), y: B + 14, 'text-anchor': 'middle'}); tx.textContent = fmt(xv, 2); g.appendChild(tx);
      var ty = svg('text', {x: L - 4, y: Y(yv) + 4, 'text-anchor': 'end'}); ty.textContent = fmt(yv, 2); g.appendChild(ty);
      g.appendChild(svg('line', {x1: L, y1: Y(yv), x2: R, y2: Y(yv), stroke: '#eef0f4'}));
    }
    var xl = svg('text', {x: (L + R) / 2, y: 272, 'text-anchor': 'middle'}); xl.textContent = xlabel; g.appendChild(xl);
    var yl = svg('text', {x: 12, y: (T + B) / 2, 'text-anchor': 'middle', transform: 'rotate(-90 12 ' + (T + B) / 2 + ')'});
    yl.textContent = ylabel; g.appendChild(yl);
    return {X: X, Y: Y};
  }
  (function tradeoff() {
    var g = document.getElementById('chart-tradeoff');
    var xs = [], ys = [];
    D.cells.forEach(function (c) { if (isFinite(c.logprob.mean)) { xs.push(c.logprob.mean); ys.push(c.distinct_2); } });
    if (!xs.length) return;
    var a = axes(g, Math.min.apply(null, xs), Math.max.apply(null, xs), Math.min.apply(null, ys), Math.max.apply(null, ys),
                 'mean log-probability per token under the model (nats)', 'distinct-2', true);
    D.cells.forEach(function (c) {
      if (!isFinite(c.logprob.mean)) return;
      var dot = svg('circle', {'class': 'cell-dot', cx: a.X(c.logprob.mean), cy: a.Y(c.distinct_2), r: 3.5, fill: color(c.strategy), 'fill-opacity': 0.55});
      var title = svg('title', {}); title.textContent = E.strategies[c.strategy].label + ' · prompt ' + (c.prompt + 1);
      dot.appendChild(title); g.appendChild(dot);
    });
    D.strategies.forEach(function (st, s) {
      if (!isFinite(st.logprob.mean)) return;
      var dot = svg('circle', {'class': 'strategy-dot', cx: a.X(st.logprob.mean), cy: a.Y(st.distinct_2.mean), r: 7, fill: color(s), stroke: '#fff', 'stroke-width': 2});
      var title = svg('title', {}); title.textContent = st.label; dot.appendChild(title); g.appendChild(dot);
    });
    legend('legend-tradeoff');
  })();
  (function entropy() {
    var g = document.getElementById('chart-entropy');
    var steps = 0, ymax = 0;
    D.per_step.forEach(function (p) {
      steps = Math.max(steps, p.entropy.length);
      p.entropy.concat(p.chain_entropy).forEach(function (v) { if (isFinite(v)) ymax = Math.max(ymax, v); });
    });
    if (!steps) return;
    var a = axes(g, 0, Math.max(1, steps - 1), 0, ymax, 'step', 'entropy (nats)', false);
    D.per_step.forEach(function (p) {
      [['entropy', ''], ['chain_entropy', '5 4']].forEach(function (k) {
        var pts = p[k[0]].map(function (v, t) { return a.X(t) + ',' + a.Y(v); }).join(' ');
        if (p[k[0]].length === 1) pts += ' ' + (a.X(0) + 3) + ',' + a.Y(p[k[0]][0]);
        var line = svg('polyline', {'class': 'entropy-line', points: pts, fill: 'none', stroke: color(p.strategy), 'stroke-width': 1.8});
        if (k[1]) line.setAttribute('stroke-dasharray', k[1]);
        g.appendChild(line);
      });
    });
    legend('legend-entropy');
  })();

  // Where sample i of strategy s stops agreeing with every other strategy's sample i.
  function lcp(a, b) { var n = 0; while (n < a.length && n < b.length && a[n] === b[n]) ++n; return n; }
  function run(p, s, i) { return D.runs_by_key[p + '/' + s + '/' + i]; }
  D.runs_by_key = {};
  D.runs.forEach(function (r) { D.runs_by_key[r.prompt + '/' + r.strategy + '/' + r.sample] = r; });

  var root = document.getElementById('prompts');
  E.prompts.forEach(function (prompt, p) {
    var sec = el('section', {'class': 'prompt', id: 'prompt-' + (p + 1)});
    sec.appendChild(el('h2', null, 'Prompt ' + (p + 1) + ': ' + JSON.stringify(prompt)));
    var t = el('table', {'class': 'cells'});
    var tr = el('tr');
    ['strategy'].concat(HEADS).forEach(function (h) { tr.appendChild(el('th', null, h)); });
    t.appendChild(tr);
    D.cells.forEach(function (c) {
      if (c.prompt !== p) return;
      var row = el('tr');
      var name = el('td'); name.appendChild(swatch(c.strategy)); name.appendChild(document.createTextNode(E.strategies[c.strategy].label)); row.appendChild(name);
      COLS.forEach(function (k) {
        var v = c[k[0]], td = el('td');
        if (k[0] === 'distinct') td.textContent = v + '/' + c.n;
        else if (typeof v === 'number') td.textContent = fmt(v, k[1]);
        else td.appendChild(pm(v, k[1]));
        row.appendChild(td);
      });
      row.appendChild(el('td', null, stops(c.stop_reasons)));
      t.appendChild(row);
    });
    sec.appendChild(t);

    var shown = Math.min(N, D.shown_samples);
    sec.appendChild(el('p', {'class': 'note'}, 'Samples side by side' + (shown < N ? ' (the first ' + shown + ' of ' + N + ')' : '') +
      (E.independent_seeds ? '' : '; sample i has the same seed in every strategy, so the highlighted token is where this strategy first chose differently from another') +
      '. Grey: shared with every other strategy; yellow: the first token that differs.'));
    var st = el('table', {'class': 'samples'});
    var head = el('tr');
    head.appendChild(el('th', null, '#'));
    E.strategies.forEach(function (s, k) { var th = el('th'); th.appendChild(swatch(k)); th.appendChild(document.createTextNode(s.label)); head.appendChild(th); });
    st.appendChild(head);
    for (var i = 0; i < shown; ++i) {
      var row = el('tr');
      row.appendChild(el('td', null, String(i + 1)));
      for (var s = 0; s < S; ++s) {
        var r = run(p, s, i), td = el('td', {'class': 'sample-cell'});
        var agree = r.tokens.length;
        for (var o = 0; o < S; ++o) if (o !== s) agree = Math.min(agree, lcp(r.tokens, run(p, o, i).tokens));
        var box = el('div', {'class': 'sample'});
        box.appendChild(el('span', {'class': 'prompt-text'}, prompt));
        r.pieces.forEach(function (piece, k) {
          var cls = 'tok ' + (k < agree ? 'shared' : k === agree && S > 1 ? 'diverge' : 'after');
          box.appendChild(el('span', {'class': cls, 'data-k': String(k)}, piece));
        });
        td.appendChild(box);
        var foot = el('div', {'class': 'sample-foot'});
        if (r.trace_page) {
          var a = el('a', {'class': 'trace-link', href: r.trace_page + (agree < r.tokens.length ? '#step=' + agree : '')}, 'trace');
          foot.appendChild(a);
        }
        foot.appendChild(document.createTextNode(r.length + ' tokens · ' + r.stop_reason + ' · logprob ' + fmt(r.logprob, 2) + ' · seed ' + r.seed_text));
        var det = el('details'); det.appendChild(el('summary', null, 'reproduce')); det.appendChild(el('code', {'class': 'command'}, r.command));
        foot.appendChild(det);
        td.appendChild(foot);
        row.appendChild(td);
      }
      st.appendChild(row);
    }
    sec.appendChild(st);
    root.appendChild(sec);
  });
  document.body.setAttribute('data-ready', '1');
})();
</script>
</body>
</html>
)glassbox_compare";

}  // namespace

std::string html(const Report& report, const std::string& html_path) {
  // The page reads the report's JSON (glassbox.compare/1) with a few additions: shown_samples, the seeds as
  // text, each shown run's viewer page, and only the runs it shows.
  json data = to_json(report);
  data["shown_samples"] = kShownSamples;
  data["experiment"]["seed_text"] = std::to_string(report.experiment.seed);
  const fs::path page_dir = fs::absolute(fs::path(html_path)).parent_path();
  json all = std::move(data["runs"]);  // to_json writes report.runs in order: all[k] is report.runs[k]
  json runs = json::array();
  for (std::size_t k = 0; k < report.runs.size(); ++k) {
    const ReportRun& r = report.runs[k];
    if (r.sample >= kShownSamples) continue;
    json x = std::move(all[k]);
    x["seed_text"] = std::to_string(r.seed);  // beyond a JS number's 53 bits
    // The trace's viewer page (written beside it), as a link relative to the report.
    x["trace_page"] = r.trace.empty() ? std::string()
                                      : fs::absolute(fs::path(r.trace).replace_extension(".html"))
                                            .lexically_relative(page_dir)
                                            .generic_string();
    runs.push_back(std::move(x));
  }
  data["runs"] = std::move(runs);
  // '<' never occurs in JSON outside strings; as \u003c inside them, no text can end the element.
  std::string embedded;
  for (char c : traces::dump(data)) {
    if (c == '<') embedded += "\\u003c";
    else embedded += c;
  }
  std::string page = kPage;
  const auto at = page.find(kPlaceholder);
  if (at == std::string::npos) throw TraceError("internal: the compare page has no data placeholder");
  page.replace(at, kPlaceholder.size(), embedded);
  return page;
}

}  // namespace glassbox::cli::compare
