"""The reading edition as one self-contained HTML page (inline CSS, JS and canvas; nothing
fetched, so it opens from disk): the same functions as the Markdown, with source line
numbers, not-run lines dimmed, folds that open, the debugger command that stops in each
function, and, where attention is computed, each head's weights as a heatmap (a value
on hover)."""

import dataclasses
import html
import json
import keyword
import re

import numpy as np

from demos.reading.listing import ONE_LINERS, Fold, exercises_shown, first_reading, fold_text, sections
from demos.reading.markdown import ONE_LINERS_ABOUT, contents_count

TOKENS = re.compile(r"(?P<comment>#.*$)|(?P<string>[rbfRBF]{0,2}(\"\"\"|'''|\"(?:\\.|[^\"\\])*\"|'(?:\\.|[^'\\])*'))"
                    r"|(?P<number>\b\d+(?:\.\d*)?(?:e-?\d+)?\b)|(?P<word>\b[A-Za-z_]\w*\b)")
KEYWORDS = set(keyword.kwlist) | {"self"}
STYLE = """
body { font: 15px/1.45 system-ui, sans-serif; margin: 0 auto; max-width: 1100px; padding: 1em 2em; color: #1d2330; }
h1 { font-size: 1.6em; } h2 { margin-top: 2em; border-bottom: 1px solid #ccd; } h4 { margin: 1.4em 0 .3em; }
h4 .where { font: 13px ui-monospace, monospace; color: #556; }
.code { font: 13px/1.4 ui-monospace, SFMono-Regular, Menlo, monospace; background: #f6f8fa; border: 1px solid #e1e4e8;
        border-radius: 4px; padding: .4em 0; overflow-x: auto; }
.l { white-space: pre; padding-right: 1em; } .l .n { display: inline-block; width: 3.5em; color: #99a; text-align: right;
     margin-right: 1em; user-select: none; }
.not { opacity: .38; } .kw { color: #a626a4; } .str { color: #50a14f; } .num { color: #986801; }
.com, .doc { color: #7a8290; font-style: italic; } .shape { color: #0b63c5; font-weight: 600; }
details.fold > summary { white-space: pre; color: #8a8f99; cursor: pointer; font-style: italic; padding-left: 4.5em; }
.cmd { font: 12px ui-monospace, monospace; color: #5f6670; margin: 0 0 .3em; }
.cmd code { color: #3f4650; } code.seq { white-space: pre; background: #eef1f6; padding: 1px 4px; }
.heads { display: grid; grid-template-columns: repeat(2, max-content); gap: 4px 14px; margin: .4em 0 .8em; }
figure.hm { margin: 0; display: grid; grid-template-columns: auto calc(var(--m) * var(--cell));
            grid-template-rows: auto 1.2em auto calc(var(--n) * var(--cell)); font: 9px/1 ui-monospace, monospace; }
figure.hm figcaption { grid-area: 1 / 2; font: 12px system-ui, sans-serif; color: #334; text-align: center; }
.kt, .qt { color: #667; font: italic 11px system-ui, sans-serif; white-space: nowrap; }
.kt { grid-area: 2 / 2; } .qt { grid-area: 2 / 1 / 4 / 2; align-self: end; text-align: right; padding-right: 3px; }
.keys { grid-area: 3 / 2; display: grid; grid-template-columns: repeat(var(--m), var(--cell)); }
.queries { grid-area: 4 / 1; display: grid; grid-template-rows: repeat(var(--n), var(--cell)); padding-right: 2px;
           justify-self: end; }
.keys span, .queries span { text-align: center; white-space: pre; overflow: hidden; line-height: var(--cell); }
canvas.heat { grid-area: 4 / 2; width: calc(var(--m) * var(--cell)); height: calc(var(--n) * var(--cell));
              image-rendering: pixelated; border: 1px solid #ccd; box-sizing: content-box; cursor: crosshair; }
nav ol { columns: 2; column-gap: 3.5em; } nav li { break-inside: avoid; } table.also { display: block; overflow-x: auto; border-collapse: collapse; font-size: 13px; }
table.also td { padding: 1px 8px 1px 0; vertical-align: top; white-space: nowrap; } table.also td.code { padding: 0; }
td.where { font: 12px ui-monospace, monospace; color: #556; }
figure.graph { margin: 1em 0; } figure.graph svg { max-width: 100%; height: auto; }
"""
SCRIPT = """
for (const c of document.querySelectorAll("canvas.heat")) {
  const rows = JSON.parse(c.dataset.weights), n = rows.length, m = rows[0].length, ctx = c.getContext("2d");
  const img = ctx.createImageData(m, n);
  for (let i = 0; i < n; i++) for (let j = 0; j < m; j++) {
    const k = 4 * (i * m + j), t = rows[i][j] > 0 ? Math.sqrt(rows[i][j] / 1e4) : -1;
    const rgb = t < 0 ? [236, 238, 242] : [255 - 244 * t, 255 - 156 * t, 255 - 58 * t];
    img.data.set([...rgb.map(Math.round), 255], k);
  }
  ctx.putImageData(img, 0, 0);
  c.addEventListener("mousemove", e => {
    const r = c.getBoundingClientRect(), i = Math.floor((e.clientY - r.top) / r.height * n),
          j = Math.floor((e.clientX - r.left) / r.width * m);
    const q = JSON.parse(c.dataset.queries), k = JSON.parse(c.dataset.keys), w = rows[i][j] / 1e4;
    c.title = `${c.dataset.label}: query ${i} '${q[i]}' → key ${j} '${k[j]}': ` +
              (rows[i][j] > 0 ? w.toFixed(3) : "0 (a masked key, or under 0.00005)");
  });
}
"""


def one_line(code):
    """CSS or this page's JS (every statement ends in ; or a brace) on one line: the page stays small."""
    return " ".join(line.strip() for line in code.strip().split("\n"))


def highlight(text):
    """A line of Python as HTML with keywords, strings, numbers and comments marked."""
    out, at = [], 0
    for match in TOKENS.finditer(text):
        kind, token = match.lastgroup, match.group()
        if kind == "word" and token not in KEYWORDS:
            continue
        out.append(html.escape(text[at:match.start()]))
        css = {"comment": "com", "string": "str", "number": "num", "word": "kw"}[kind]
        out.append(f'<span class="{css}">{html.escape(token)}</span>')
        at = match.end()
    return "".join(out) + html.escape(text[at:])


def line_html(line):
    code = f'<span class="doc">{html.escape(line.text)}</span>' if line.status == "doc" else highlight(line.text)
    shape = f'<span class="shape">  # {line.shape}</span>' if line.shape else ""
    return f'<div class="l {line.status}"><span class="n">{line.number}</span>{code}{shape}</div>'


def rows_html(function):
    parts = []
    for row in function.rows:
        if isinstance(row, Fold):
            parts.append(f'<details class="fold"><summary>{html.escape(fold_text(row))}</summary>'
                         + "".join(line_html(line) for line in row.lines) + "</details>")
        else:
            parts.append(line_html(row))
    return "".join(parts)


QUERY_AXIS = "query ↓"    # above the queries' column, level like "key →": read without turning the head
CELL = 240          # a heatmap's side in pixels, about: each position a cell of CELL // length pixels, 10 to 20


def heatmap(label, head, queries, keys):
    """One head's weights (T_q, T_k) as a canvas between its axes: the query positions down
    the left, the key positions along the top, each named by its token (queries, keys: the
    tokens shown, or None for the positions' numbers); the weights in 1/10000 (JSON in a data
    attribute, drawn by SCRIPT; exactly 0 is a masked key), named on hover."""
    n, m = head.shape
    queries, keys = queries or [str(i) for i in range(n)], keys or [str(j) for j in range(m)]
    quantized = json.dumps(np.round(head * 1e4).astype(int).tolist(), separators=(",", ":"))
    ticks = lambda kind, tokens: (f'<div class="{kind}">' + "".join(f"<span>{html.escape(t)}</span>" for t in tokens)
                                  + "</div>")
    return (f'<figure class="hm" style="--n: {n}; --m: {m}; --cell: {min(20, max(10, CELL // max(n, m)))}px">'
            f'<figcaption>{html.escape(label)}</figcaption><span class="kt">key →</span>'
            f'<span class="qt">{QUERY_AXIS}</span>{ticks("keys", keys)}{ticks("queries", queries)}'
            f'<canvas class="heat" width="{m}" height="{n}" data-label="{html.escape(label)}" '
            f'data-weights="{quantized}" data-queries="{html.escape(json.dumps(queries))}" '
            f'data-keys="{html.escape(json.dumps(keys))}" title="{html.escape(label)}"></canvas></figure>')


def heatmaps(values, labels, note="", axes=None):
    """One row per call of the attention (labels: what each call is, e.g. a layer) of one
    heatmap per head, of batch element 0; note: what they show, if not this step's; axes:
    each call's (query tokens, key tokens), or None for positions' numbers."""
    rows = []
    for n, (label, weights) in enumerate(zip(labels, values)):
        queries, keys = axes[n] if axes else (None, None)
        heads = np.asarray(getattr(weights, "data", weights))[0]          # (H, T_q, T_k) of batch element 0
        rows.append('<div class="heads">' + "".join(heatmap(f"{label}, head {h}", head, queries, keys)
                                                     for h, head in enumerate(heads)) + "</div>")
    whose = html.escape(note or "The weights this function computed on the step, for the batch's first sequence.")
    return (f'<p>{whose} One heatmap per head: row i is query position i, column j key position j, each named by its '
            'token; darker is heavier, on one scale for every row and head: the square root '
            'of the weight, so that a query attending evenly is pale and one that picks a key is dark; grey: a weight '
            'under 0.00005, a masked key\'s 0 among them. Hover for a value.</p>' + "".join(rows))


def function_html(function, step):
    command = f"{step.environment} python -m demos.debug -b {function.breakpoint()} {step.debug}".strip()
    watched = [values for (path, name, _), values in (step.heatmaps or step.trace.watched).items()
               if path == function.path and name == function.name.rsplit(".", 1)[-1]]
    return (f'<h4><span class="where">{html.escape(function.path)}:{function.first}</span> {html.escape(function.name)}</h4>'
            f'<div class="cmd">stop here: <code>{html.escape(command)}</code></div>'
            f'<div class="code">{rows_html(function)}</div>'
            + "".join(heatmaps(values, step.heatmap_labels, step.heatmap_note, step.heatmap_axes)
                      for values in watched if values))


def one_liners_html(functions):
    """The one-liners as one table: name, file, the one line (its number, unindented, its shape)."""
    rows = "".join(f'<tr><td>{html.escape(f.name)}</td><td class="where">{html.escape(f.path)}</td><td class="code">'
                   f'{line_html(dataclasses.replace(f.one_line, text=f.one_line.text.strip()))}</td></tr>'
                   for f in functions)
    return f'<p>{html.escape(ONE_LINERS_ABOUT)}</p><table class="also">{rows}</table>'


def render(step, shown, top_html, bottom_html, graph_svg=None):
    """The page: title, what it shows and how to read it (top_html), the graph's drawing if
    any, the contents, every section's functions, how it was made (bottom_html)."""
    grouped = sections(shown)
    graph_html = f'<figure class="graph">{graph_svg}</figure>' if graph_svg else ""
    toc = "".join(f'<li><a href="#s{n}">{html.escape(title)}</a> ({contents_count(functions)})</li>'
                  for n, (title, functions) in enumerate(grouped, 1))
    first = f"<p>{html.escape(first_reading(grouped))}</p>" if first_reading(grouped) else ""
    body = "".join(f'<h2 id="s{n}">{n}. {html.escape(title)}</h2>'
                   + (one_liners_html(functions) if title == ONE_LINERS else
                      "".join(function_html(f, step) for f in functions))
                   for n, (title, functions) in enumerate(grouped, 1))
    return (f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8"><title>{html.escape(step.title)}: the reading '
            f'edition</title><style>{one_line(STYLE)}</style></head><body>\n<h1>{html.escape(step.title)}: the reading edition</h1>'
            f'<!-- generated by python -m demos.reading from a traced run; do not edit by hand -->{exercises_shown(shown)}'
            f'{top_html}{graph_html}{first}<nav><ol>{toc}</ol></nav>\n{body}\n<h2 id="made">How this page was made</h2>'
            f'{bottom_html}\n<script>{one_line(SCRIPT)}</script></body></html>\n')


def inline(text):
    """Markdown's `code` and [links](url) of a paragraph, as HTML; a link to another reading
    page (`gpt_step.md`) goes to its HTML page, beside this one."""
    escaped = html.escape(text, quote=False)
    escaped = re.sub(r"`([^`]+)`", r"<code>\1</code>", escaped)
    escaped = re.sub(r"\]\((\w+)\.md\)", r"](\1.html)", escaped)
    return re.sub(r"\[([^\]]+)\]\(([^)]+)\)", r'<a href="\2">\1</a>', escaped)
