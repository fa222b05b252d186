// `glassbox compare --html`: one self-contained page (no network, no external script) with the report
// embedded as JSON: the strategies' metrics, the figures, the first tokens, and the samples side by side with
// links to traces. The figures are drawn here as SVG (round ticks, labelled strategies), so that the page and
// `--figures DIR` (SVG, and PNG through rsvg-convert) show the same charts.
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <sstream>
#include <string_view>

#include "compare.hpp"
#include "glassbox/error.hpp"
#include "glassbox/file_io.hpp"
#include "glassbox/traces/writer.hpp"

extern char** environ;

namespace fs = std::filesystem;
using nlohmann::json;

namespace glassbox::cli::compare {

namespace {

constexpr int kShownSamples = 20;  // per prompt and strategy; the JSON report has them all
constexpr std::string_view kPlaceholder = "@GLASSBOX_COMPARE_JSON@";
constexpr std::string_view kFigures = "@GLASSBOX_COMPARE_FIGURES@";

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
  .figure svg { display: block; width: 100%; max-width: var(--w); height: auto; }
  .figure .export { font-size: 12px; color: var(--muted); }
  table.first td, table.first th { text-align: left; }
  .ft { font-family: ui-monospace, "SFMono-Regular", Menlo, monospace; background: var(--bg); border-radius: 3px; padding: 0 3px; margin-right: 2px; }
  .same-note { color: var(--muted); font-size: 12px; font-style: italic; }
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
@GLASSBOX_COMPARE_FIGURES@
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
  // A token's text for a person: a special token by its bare name (llama2.c's "\n</s>\n" is </s>), as
  // traces::special_name does in C++ (traces/include/glassbox/traces/token_text.hpp).
  function special(t) {
    var core = String(t).replace(/^[ \n\r\t]+|[ \n\r\t]+$/g, '');
    if (!/^<[^\s<>]{1,46}>$/.test(core)) return '';
    return core !== t || /^<\|.*\|>$/.test(core) || /^(<s>|<\/s>|<unk>|<pad>|<eos>|<bos>)$/.test(core) ? core : '';
  }
  function person(t) { var sp = special(t); return sp ? sp : JSON.stringify(String(t)).slice(1, -1).replace(/\\"/g, '"'); }
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
        // a number, or null for one that is not finite (an infinite perplexity: a token of probability 0 was drawn)
        if (v === null || typeof v === 'number') td.textContent = fmt(v, c[1]); else td.appendChild(pm(v, c[1]));
        row.appendChild(td);
      });
      row.appendChild(el('td', null, stops(st.stop_reasons)));
      if (anySpecific) row.appendChild(el('td', {'class': 'specific'}, specific(st)));
      t.appendChild(row);
    });
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
        else if (v === null || typeof v === 'number') td.textContent = fmt(v, k[1]);
        else td.appendChild(pm(v, k[1]));
        row.appendChild(td);
      });
      row.appendChild(el('td', null, stops(c.stop_reasons)));
      t.appendChild(row);
    });
    sec.appendChild(t);

    // The first token: what each strategy drew at step 0 (count of N), with its probability after the chain;
    // tokens the chain allowed but no sample drew follow, greyed; none the chain gave probability 0.
    sec.appendChild(el('p', {'class': 'note'}, 'First token: each token drawn at step 0, how many of the ' + N +
      ' samples drew it, and (in brackets) its probability after the chain; then tokens the chain allowed that no sample drew.'));
    var ft = el('table', {'class': 'first'});
    var fh = el('tr');
    ['strategy', 'drawn', 'allowed, not drawn'].forEach(function (h) { fh.appendChild(el('th', null, h)); });
    ft.appendChild(fh);
    D.cells.forEach(function (c) {
      if (c.prompt !== p) return;
      var row = el('tr', {'class': 'first-row'});
      var name = el('td'); name.appendChild(swatch(c.strategy)); name.appendChild(document.createTextNode(E.strategies[c.strategy].label)); row.appendChild(name);
      var drawn = el('td'), other = el('td');
      c.first_tokens.filter(function (f) { return f.count > 0; }).sort(function (a, b) { return b.count - a.count || a.id - b.id; })
        .forEach(function (f) {
          var item = el('span', {'class': 'first-drawn'});
          item.appendChild(el('span', {'class': 'ft'}, person(f.text)));
          item.appendChild(document.createTextNode(f.count + '/' + c.n + (f.expected !== null ? ' (' + fmt(f.expected, 3) + ')' : '') + '  '));
          drawn.appendChild(item);
        });
      var rest = c.first_tokens.filter(function (f) { return f.count === 0 && f.expected !== null && f.expected > 0; });
      rest.slice(0, 5).forEach(function (f) {
        var item = el('span', {'class': 'sd'});
        item.appendChild(el('span', {'class': 'ft'}, person(f.text)));
        item.appendChild(document.createTextNode('(' + fmt(f.expected, 3) + ')  '));
        other.appendChild(item);
      });
      if (rest.length > 5) other.appendChild(el('span', {'class': 'sd'}, '… ' + (rest.length - 5) + ' more'));
      row.appendChild(drawn);
      row.appendChild(other);
      ft.appendChild(row);
    });
    sec.appendChild(ft);

    var shown = Math.min(N, D.shown_samples);
    sec.appendChild(el('p', {'class': 'note'}, 'Samples side by side' + (shown < N ? ' (the first ' + shown + ' of ' + N + ')' : '') +
      (E.independent_seeds ? '' : '; sample i has the same seed in every strategy, so the highlighted token is where this strategy first chose differently from another') +
      '. Grey: shared with every other strategy; yellow: the first token that differs. A strategy that takes the argmax ' +
      'at every step (greedy, beam search) gives the same text in every sample: it is shown once, without a seed.'));
    var st = el('table', {'class': 'samples'});
    var head = el('tr');
    head.appendChild(el('th', null, '#'));
    E.strategies.forEach(function (s, k) { var th = el('th'); th.appendChild(swatch(k)); th.appendChild(document.createTextNode(s.label)); head.appendChild(th); });
    st.appendChild(head);
    for (var i = 0; i < shown; ++i) {
      var row = el('tr');
      row.appendChild(el('td', null, String(i + 1)));
      for (var s = 0; s < S; ++s) {
        var det = D.deterministic[s];
        if (det && i > 0) continue;  // under the first row's cell (rowspan)
        var r = run(p, s, i), td = el('td', {'class': 'sample-cell' + (det ? ' deterministic' : '')});
        if (det) td.setAttribute('rowspan', String(shown));
        var agree = r.tokens.length;
        // A deterministic column is one text, not a draw: nothing in it is highlighted.
        if (!det) for (var o = 0; o < S; ++o) if (o !== s) agree = Math.min(agree, lcp(r.tokens, run(p, o, i).tokens));
        var box = el('div', {'class': 'sample'});
        box.appendChild(el('span', {'class': 'prompt-text'}, prompt));
        r.pieces.forEach(function (piece, k) {
          var cls = 'tok ' + (det ? 'after' : k < agree ? 'shared' : k === agree && S > 1 ? 'diverge' : 'after');
          box.appendChild(el('span', {'class': cls, 'data-k': String(k)}, special(piece) || piece));
        });
        td.appendChild(box);
        var foot = el('div', {'class': 'sample-foot'});
        if (r.trace_page) {
          var a = el('a', {'class': 'trace-link', href: r.trace_page + (agree < r.tokens.length ? '#step=' + agree : '')}, 'trace');
          foot.appendChild(a);
        }
        foot.appendChild(document.createTextNode(r.length + ' tokens · ' + r.stop_reason + ' · logprob ' + fmt(r.logprob, 2) +
          (det ? '' : ' · seed ' + r.seed_text)));
        if (det) foot.appendChild(el('div', {'class': 'same-note'}, 'argmax at every step: all ' + N + ' samples are this text (the seed is not used)'));
        var rep = el('details'); rep.appendChild(el('summary', null, 'reproduce')); rep.appendChild(el('code', {'class': 'command'}, det ? r.command.replace(/ --seed [0-9]+/, '') : r.command));
        foot.appendChild(rep);
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

// ---------------------------------------------------------------- the figures (SVG, drawn here, not in the page)

namespace {

const char* const kColors[] = {"#1f4e9c", "#d9822b", "#2f8a4c", "#b03a48", "#7b4fb3", "#0f8b8d", "#8c6d1f", "#5b6070"};
const char* color(int s) { return kColors[s % 8]; }

std::string xml(const std::string& s) {
  std::string o;
  for (char c : s) {
    if (c == '&') o += "&amp;";
    else if (c == '<') o += "&lt;";
    else if (c == '>') o += "&gt;";
    else if (c == '"') o += "&quot;";
    else if (static_cast<unsigned char>(c) < 0x20) o += ' ';
    else o += c;
  }
  return o;
}

std::string num(double x, int decimals = 1) {
  char buf[48];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, x);
  std::string s = buf;
  if (s == "-0" || (s.rfind("-0.", 0) == 0 && s.find_first_not_of("-0.") == std::string::npos)) s.erase(0, 1);  // no "-0.00"
  return s;
}

// The step between round ticks and the decimals that print it exactly.
double tick_step(double lo, double hi, int target) {
  const double raw = (hi - lo) / std::max(1, target);
  const double mag = std::pow(10.0, std::floor(std::log10(raw)));
  for (double m : {1.0, 2.0, 5.0})
    if (m * mag >= raw * (1 - 1e-9)) return m * mag;
  return 10 * mag;
}
int tick_decimals(double step) { return std::max(0, static_cast<int>(-std::floor(std::log10(step) + 1e-9))); }

// An axis: [lo, hi] widened to the ticks around it.
struct Axis {
  double lo = 0, hi = 1, step = 1;
  int decimals = 0;
  std::vector<double> ticks;
};
Axis axis(double lo, double hi, int target) {
  if (!std::isfinite(lo) || !std::isfinite(hi)) lo = 0, hi = 1;
  if (hi < lo) std::swap(lo, hi);
  if (hi - lo < 1e-12) {  // one value: a unit around it
    const double pad = std::max(std::abs(lo) * 0.1, 0.5);
    lo -= pad, hi += pad;
  }
  Axis a;
  a.step = tick_step(lo, hi, target);
  a.decimals = tick_decimals(a.step);
  a.lo = std::floor(lo / a.step + 1e-9) * a.step;
  a.hi = std::ceil(hi / a.step - 1e-9) * a.step;
  for (long k = std::lround(a.lo / a.step); k <= std::lround(a.hi / a.step); ++k) a.ticks.push_back(static_cast<double>(k) * a.step);
  return a;
}

struct Svg {
  std::ostringstream o;
  Svg(int w, int h, const std::string& title) {
    o << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << w << "\" height=\"" << h << "\" viewBox=\"0 0 " << w << " " << h
      << "\" font-family=\"DejaVu Sans, Helvetica, Arial, sans-serif\" font-size=\"12\">\n<title>" << xml(title) << "</title>\n"
      << "<rect width=\"" << w << "\" height=\"" << h << "\" fill=\"#ffffff\"/>\n"
      << "<text x=\"16\" y=\"24\" font-size=\"15\" font-weight=\"600\" fill=\"#1d2330\">" << xml(title) << "</text>\n";
  }
  void line(double x1, double y1, double x2, double y2, const std::string& stroke, double width = 1, const std::string& extra = "") {
    o << "<line x1=\"" << num(x1) << "\" y1=\"" << num(y1) << "\" x2=\"" << num(x2) << "\" y2=\"" << num(y2) << "\" stroke=\"" << stroke
      << "\" stroke-width=\"" << num(width) << "\"" << extra << "/>\n";
  }
  void text(double x, double y, const std::string& t, const std::string& attrs) {
    o << "<text x=\"" << num(x) << "\" y=\"" << num(y) << "\" " << attrs << ">" << xml(t) << "</text>\n";
  }
  // A note under the chart, wrapped at `chars` characters a line, from y on, 14 px a line.
  void note(double y, const std::string& text, std::size_t chars) {
    std::string line, word;
    std::istringstream in(text);
    std::vector<std::string> lines;
    while (in >> word) {
      if (!line.empty() && line.size() + 1 + word.size() > chars) lines.push_back(line), line.clear();
      line += (line.empty() ? "" : " ") + word;
    }
    if (!line.empty()) lines.push_back(line);
    for (std::size_t i = 0; i < lines.size(); ++i) text_line(16, y + 14 * static_cast<double>(i), lines[i]);
  }
  void text_line(double x, double y, const std::string& t) { text(x, y, t, "fill=\"#4b5263\" font-size=\"11\""); }
  std::string done() { return o.str() + "</svg>\n"; }
};

// A plot frame: gridlines and round tick labels (class tick-x / tick-y, data-value the number).
struct Frame {
  double L, R, T, B;
  Axis x, y;
  double X(double v) const { return L + (v - x.lo) / (x.hi - x.lo) * (R - L); }
  double Y(double v) const { return B - (v - y.lo) / (y.hi - y.lo) * (B - T); }
  void draw(Svg& g, bool x_labels, bool y_labels) const {
    for (double v : y.ticks) {
      g.line(L, Y(v), R, Y(v), "#e6e9ef");
      if (y_labels)
        g.text(L - 6, Y(v) + 4, num(v, y.decimals),
               "class=\"tick-y\" data-value=\"" + num(v, y.decimals) + "\" text-anchor=\"end\" fill=\"#4b5263\"");
    }
    for (double v : x.ticks) {
      g.line(X(v), B, X(v), B + 4, "#9aa3b2");
      if (x_labels)
        g.text(X(v), B + 17, num(v, x.decimals),
               "class=\"tick-x\" data-value=\"" + num(v, x.decimals) + "\" text-anchor=\"middle\" fill=\"#4b5263\"");
    }
    g.line(L, B, R, B, "#9aa3b2");
    g.line(L, T, L, B, "#9aa3b2");
  }
};

// Diversity (distinct-2) against the mean log-probability per token: a small dot per prompt, a large one per
// strategy with ± 1 sd bars, each strategy labelled beside its dot.
Figure tradeoff_figure(const Report& rep) {
  const auto& S = rep.strategies;
  const int W = 760, H = 486;
  Figure f{"tradeoff", "Diversity against model log-probability", ""};
  Svg g(W, H, f.title);
  double xl = HUGE_VAL, xh = -HUGE_VAL, yl = HUGE_VAL, yh = -HUGE_VAL;
  auto take = [&](double x, double y) {
    if (!std::isfinite(x) || !std::isfinite(y)) return;
    xl = std::min(xl, x), xh = std::max(xh, x), yl = std::min(yl, y), yh = std::max(yh, y);
  };
  for (const auto& c : rep.cells) take(c.samples.logprob.mean, c.distinct_2);
  for (const auto& st : S) {
    if (!std::isfinite(st.samples.logprob.mean)) continue;
    take(st.samples.logprob.mean - st.samples.logprob.sd, st.distinct_2.mean - st.distinct_2.sd);
    take(st.samples.logprob.mean + st.samples.logprob.sd, st.distinct_2.mean + st.distinct_2.sd);
  }
  if (!(xl <= xh)) xl = -1, xh = 0, yl = 0, yh = 1;
  Frame fr{76, static_cast<double>(W - 24), 44, static_cast<double>(H - 100), axis(xl, xh, 6), axis(std::max(0.0, yl), std::min(1.0, yh), 5)};
  fr.draw(g, true, true);
  g.text((fr.L + fr.R) / 2, fr.B + 38, "mean log-probability per token under the model (nats) → more likely",
         "text-anchor=\"middle\" fill=\"#1d2330\"");
  g.text(18, (fr.T + fr.B) / 2, "distinct-2 → more diverse",
         "text-anchor=\"middle\" fill=\"#1d2330\" transform=\"rotate(-90 18 " + num((fr.T + fr.B) / 2) + ")\"");
  for (const auto& c : rep.cells) {
    if (!std::isfinite(c.samples.logprob.mean)) continue;
    g.o << "<circle class=\"cell-dot\" cx=\"" << num(fr.X(c.samples.logprob.mean)) << "\" cy=\"" << num(fr.Y(c.distinct_2))
        << "\" r=\"3.5\" fill=\"" << color(c.strategy) << "\" fill-opacity=\"0.45\"><title>" << xml(S[c.strategy].label) << " · prompt "
        << c.prompt + 1 << "</title></circle>\n";
  }
  // Labels: beside each dot, nudged apart vertically (at least 15 px), with a leader line when moved.
  struct Lab {
    int s;
    double x, y, ly;
    bool left;
  };
  std::vector<Lab> labs;
  std::vector<std::string> unplotted;
  for (int s = 0; s < static_cast<int>(S.size()); ++s) {
    const auto& st = S[s];
    if (!std::isfinite(st.samples.logprob.mean)) {
      unplotted.push_back(st.label);
      continue;
    }
    const double x = fr.X(st.samples.logprob.mean), y = fr.Y(st.distinct_2.mean);
    const double x0 = fr.X(st.samples.logprob.mean - st.samples.logprob.sd), x1 = fr.X(st.samples.logprob.mean + st.samples.logprob.sd);
    const double y0 = fr.Y(st.distinct_2.mean - st.distinct_2.sd), y1 = fr.Y(st.distinct_2.mean + st.distinct_2.sd);
    const std::string err = " class=\"error-bar\"";
    g.line(x0, y, x1, y, color(s), 1.6, err);
    g.line(x0, y - 4, x0, y + 4, color(s), 1.6, err);
    g.line(x1, y - 4, x1, y + 4, color(s), 1.6, err);
    g.line(x, y0, x, y1, color(s), 1.6, err);
    g.line(x - 4, y0, x + 4, y0, color(s), 1.6, err);
    g.line(x - 4, y1, x + 4, y1, color(s), 1.6, err);
    g.o << "<circle class=\"strategy-dot\" cx=\"" << num(x) << "\" cy=\"" << num(y) << "\" r=\"7\" fill=\"" << color(s)
        << "\" stroke=\"#ffffff\" stroke-width=\"2\"><title>" << xml(st.label) << "</title></circle>\n";
    labs.push_back({s, x, y, y, x > fr.L + 0.68 * (fr.R - fr.L)});
  }
  std::sort(labs.begin(), labs.end(), [](const Lab& a, const Lab& b) { return a.y < b.y || (a.y == b.y && a.s < b.s); });
  for (std::size_t i = 1; i < labs.size(); ++i) labs[i].ly = std::max(labs[i].ly, labs[i - 1].ly + 15);
  const double over = labs.empty() ? 0 : labs.back().ly - (fr.B - 4);
  if (over > 0) {
    for (auto& l : labs) l.ly -= over;
    for (std::size_t i = labs.size() - 1; i-- > 0;) labs[i].ly = std::min(labs[i].ly, labs[i + 1].ly - 15);
  }
  for (const auto& l : labs) {
    const double tx = l.left ? l.x - 12 : l.x + 12;
    if (std::abs(l.ly - l.y) > 3) g.line(l.x, l.y, tx, l.ly - 4, "#9aa3b2", 0.8);
    g.text(tx, l.ly, S[l.s].label, std::string("class=\"strategy-label\" font-weight=\"600\" fill=\"") + color(l.s) +
                                      "\" text-anchor=\"" + (l.left ? "end" : "start") + "\" stroke=\"#ffffff\" stroke-width=\"3\" "
                                      "paint-order=\"stroke\"");
  }
  std::string note = "Large dot: a strategy's mean, bars ± 1 sd (log-probability over its samples, distinct-2 over prompts); "
                     "small dots: one per prompt.";
  if (!unplotted.empty()) {
    // Named all the same, top right, with why they have no place on the x axis.
    note += " Top right, not drawn: mean log-probability −∞ (a sample drew a token of probability 0).";
    for (std::size_t k = 0; k < unplotted.size(); ++k)
      for (int s = 0; s < static_cast<int>(S.size()); ++s)
        if (S[s].label == unplotted[k]) {
          g.text(fr.R - 6, fr.T + 14 + 16 * static_cast<double>(k), "not drawn (log p −∞)",
                 "text-anchor=\"end\" fill=\"#4b5263\" font-size=\"11\"");
          g.text(fr.R - 126, fr.T + 14 + 16 * static_cast<double>(k), S[s].label,
                 std::string("class=\"strategy-label\" font-weight=\"600\" text-anchor=\"end\" fill=\"") + color(s) + "\"");
          break;
        }
  }
  g.note(H - 30, note, static_cast<std::size_t>((W - 32) / 6.4));
  f.svg = g.done();
  return f;
}

// Entropy per step as small multiples: one panel per strategy on shared axes, the median of the model's
// entropy over the runs with the middle half of them as a band, and the median entropy of the distribution
// the chain drew from (0 for an argmax) dashed.
Figure entropy_figure(const Report& rep) {
  const int n = static_cast<int>(rep.per_step.size());
  const int cols = n <= 3 ? std::max(1, n) : n == 4 ? 2 : n <= 9 ? 3 : 4;
  const int rows = std::max(1, (n + cols - 1) / cols);
  const int pw = 250, ph = 170, left = 64, top = 44;
  const int W = left + cols * pw + 10, H = top + rows * ph + 78;
  Figure f{"entropy", "Entropy per step, one panel per strategy", ""};
  Svg g(W, H, f.title);
  std::size_t steps = 1;
  double ymax = 0.1;
  for (const auto& p : rep.per_step) {
    steps = std::max(steps, p.entropy_median.size());
    for (double v : p.entropy_p75) if (std::isfinite(v)) ymax = std::max(ymax, v);
    for (double v : p.chain_entropy_median) if (std::isfinite(v)) ymax = std::max(ymax, v);
  }
  const Axis xa = axis(0, std::max<double>(1, static_cast<double>(steps - 1)), 4), ya = axis(0, ymax, 4);
  for (int k = 0; k < n; ++k) {
    const auto& p = rep.per_step[k];
    const int c = k % cols, r = k / cols;
    Frame fr{static_cast<double>(left + c * pw), static_cast<double>(left + c * pw + pw - 22), static_cast<double>(top + r * ph + 22),
             static_cast<double>(top + r * ph + ph - 26), xa, ya};
    fr.draw(g, true, c == 0);
    g.text(fr.L + 4, fr.T - 6, rep.strategies[p.strategy].label,
           std::string("class=\"strategy-label\" font-weight=\"600\" fill=\"") + color(p.strategy) + "\"");
    const std::size_t m = p.entropy_median.size();
    if (m == 0) continue;
    auto pts = [&](const std::vector<double>& v, bool reverse) {
      std::string s;
      for (std::size_t i = 0; i < v.size(); ++i) {
        const std::size_t t = reverse ? v.size() - 1 - i : i;
        s += num(fr.X(static_cast<double>(t))) + "," + num(fr.Y(v[t])) + " ";
      }
      return s;
    };
    g.o << "<polygon class=\"entropy-band\" points=\"" << pts(p.entropy_p75, false) << pts(p.entropy_p25, true) << "\" fill=\""
        << color(p.strategy) << "\" fill-opacity=\"0.18\" stroke=\"none\"/>\n";
    std::string med = pts(p.entropy_median, false), chain = pts(p.chain_entropy_median, false);
    if (m == 1) {  // one step: a short stroke, so that the line shows
      med += num(fr.X(0) + 4) + "," + num(fr.Y(p.entropy_median[0]));
      chain += num(fr.X(0) + 4) + "," + num(fr.Y(p.chain_entropy_median[0]));
    }
    g.o << "<polyline class=\"entropy-line\" points=\"" << med << "\" fill=\"none\" stroke=\"" << color(p.strategy)
        << "\" stroke-width=\"2\"/>\n";
    g.o << "<polyline class=\"chain-entropy-line\" points=\"" << chain << "\" fill=\"none\" stroke=\"" << color(p.strategy)
        << "\" stroke-width=\"1.6\" stroke-dasharray=\"5 4\"/>\n";
  }
  g.text(left + cols * pw / 2.0, top + rows * ph + 4, "step", "text-anchor=\"middle\" fill=\"#1d2330\"");
  g.text(18, top + rows * ph / 2.0, "entropy (nats)",
         "text-anchor=\"middle\" fill=\"#1d2330\" transform=\"rotate(-90 18 " + num(top + rows * ph / 2.0) + ")\"");
  g.note(H - 44, "Solid: median entropy of the model's distribution over the runs that reached the step; band: the middle half "
                 "of them (25th–75th percentile); dashed: median entropy of the distribution the chain drew from (0: an argmax).",
         static_cast<std::size_t>((W - 32) / 6.4));
  f.svg = g.done();
  return f;
}

// rsvg-convert: $GLASSBOX_RSVG_CONVERT, else found on PATH; empty when neither.
std::string svg_renderer() {
  if (const char* e = std::getenv("GLASSBOX_RSVG_CONVERT"); e && *e) return e;
  const char* path = std::getenv("PATH");
  std::string dirs = path ? path : "/usr/bin:/bin";
  std::size_t start = 0;
  while (start <= dirs.size()) {
    const auto end = dirs.find(':', start);
    const fs::path p = fs::path(dirs.substr(start, end == std::string::npos ? std::string::npos : end - start)) / "rsvg-convert";
    if (::access(p.c_str(), X_OK) == 0) return p.string();
    if (end == std::string::npos) break;
    start = end + 1;
  }
  return "";
}

}  // namespace

std::vector<double> nice_ticks(double lo, double hi, int target) { return axis(lo, hi, target).ticks; }

std::vector<Figure> figures(const Report& report) { return {tradeoff_figure(report), entropy_figure(report)}; }

void check_figure_tools() {
  if (svg_renderer().empty())
    throw ConfigError("--figures writes PNG through rsvg-convert, which is not installed (Debian: apt install librsvg2-bin; "
                      "tools/install-deps.sh installs it), or set GLASSBOX_RSVG_CONVERT to it");
}

std::vector<std::string> write_figures(const Report& report, const std::string& dir) {
#if defined(__EMSCRIPTEN__)
  throw ConfigError("--figures " + dir + ": this build cannot start rsvg-convert for the PNG figures (WebAssembly); draw them with a native glassbox");
#endif
  check_figure_tools();
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec || !fs::is_directory(dir)) throw OutputError("--figures " + dir + ": cannot create the folder (" + ec.message() + ")");
  const std::string renderer = svg_renderer();
  std::vector<std::string> written;
  for (const auto& f : figures(report)) {
    const fs::path svg = fs::path(dir) / (f.name + ".svg"), png = fs::path(dir) / (f.name + ".png");
    write_file_atomically(svg, f.svg);
    written.push_back(svg.string());
    // Twice the SVG's size, so that a slide or a paper gets a sharp bitmap; written beside, then renamed.
    const fs::path tmp = fs::path(dir) / ("." + f.name + ".png.tmp");
    const std::string svg_s = svg.string(), tmp_s = tmp.string();
    const char* argv[] = {renderer.c_str(), "--zoom=2", "--format=png", "-o", tmp_s.c_str(), svg_s.c_str(), nullptr};
    pid_t pid = 0;
    if (::posix_spawnp(&pid, renderer.c_str(), nullptr, nullptr, const_cast<char* const*>(argv), environ) != 0)
      throw OutputError("--figures: cannot start " + renderer);
    int status = 0;
    while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0 || !fs::exists(tmp)) {
      fs::remove(tmp, ec);
      throw OutputError("--figures: " + renderer + " could not draw " + svg.string() + " as PNG (exit " +
                        std::to_string(WIFEXITED(status) ? WEXITSTATUS(status) : -1) + ")");
    }
    fs::rename(tmp, png, ec);
    if (ec) throw OutputError("--figures: cannot write " + png.string() + " (" + ec.message() + ")");
    written.push_back(png.string());
  }
  return written;
}

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
  // A strategy that drew nothing (argmax_only): its samples are one text and their seeds mean nothing.
  json det = json::array();
  for (std::size_t s = 0; s < report.strategies.size(); ++s) det.push_back(argmax_only(report, static_cast<int>(s)));
  data["deterministic"] = std::move(det);
  // '<' never occurs in JSON outside strings; as \u003c inside them, no text can end the element.
  std::string embedded;
  for (char c : traces::dump(data)) {
    if (c == '<') embedded += "\\u003c";
    else embedded += c;
  }
  std::string figs;
  for (const auto& f : figures(report)) {
    const auto w = f.svg.find("width=\"");
    const std::string width = w == std::string::npos ? "800" : f.svg.substr(w + 7, f.svg.find('"', w + 7) - w - 7);
    figs += "  <section class=\"wide figure\" id=\"figure-" + f.name + "\" style=\"--w: " + width + "px\">\n" + f.svg +
            "  <p class=\"export\">As files for a slide or a paper: <code>glassbox compare … --figures DIR</code> writes " + f.name +
            ".svg and " + f.name + ".png.</p></section>\n";
  }
  // Both placeholders found in the template first: the later one (the data) replaced first, so that no text
  // put into the page can be taken for a placeholder.
  std::string page = kPage;
  const auto at = page.find(kPlaceholder), fat = page.find(kFigures);
  if (at == std::string::npos || fat == std::string::npos || fat > at) throw TraceError("internal: the compare page's placeholders");
  page.replace(at, kPlaceholder.size(), embedded);
  page.replace(fat, kFigures.size(), figs);
  return page;
}

}  // namespace glassbox::cli::compare
