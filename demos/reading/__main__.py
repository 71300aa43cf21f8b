"""The reading edition: one training step, traced, written as one page of the code it ran.

    python -m demos.reading --out docs/reading           # gpt_step, seq2seq_step, scalar_backward, loops_tier
    python -m demos.reading --out runs/reading --page gpt_step --json runs/reading/measures.json

Traces a real step (demos/reading/steps.py says which, and on which tier of kernels) and
writes every function it entered, once and whole, in reading order, with the lines it did
not run dimmed and the shape of every array it made: a Markdown page for GitHub and a
self-contained HTML page that opens from disk (demos/reading/markdown.py, html.py).
`python -m demos.figures --only reading` regenerates the copy under docs/reading/, and
tests/demos/test_reading.py checks it still matches the source.
"""

import os

from demos._flags import a_file_to_write, command_line
from demos._results import write_json
from demos.reading import graph, html, listing, markdown, steps

PAGES = {"gpt_step": steps.gpt_step, "seq2seq_step": steps.seq2seq_step, "scalar_backward": steps.scalar_backward,
         "loops_tier": steps.loops_tier}


def debugger_note(step):
    tier = f" `{step.environment}` chooses the kernels this page was traced on." if step.environment else ""
    return (f"Each function's \"stop here\" command, run from the project's folder, runs `{step.debug}` under "
            "the debugger (demos/debug.py) and stops at the function's first line: `s` steps into what it calls, "
            f"`n` runs one line, `c` goes on, `p NAME` prints a variable.{tier}")


def paragraphs(*texts):
    """Markdown paragraphs (code and links; a blank line starts another) as HTML, the empty
    ones left out."""
    return "".join(f"<p>{html.inline(part)}</p>" for text in texts for part in text.split("\n\n") if part)


def write(step, out_dir):
    """Write the step's two pages into out_dir; returns the page's measures."""
    shown = listing.functions(step.trace, step.phases)
    measures = listing.figures(step.trace, shown)
    html_name = f"{step.name}.html"
    with open(os.path.join(out_dir, f"{step.name}.md"), "w", encoding="utf-8") as f:
        f.write(markdown.render(step, shown, measures, html_name))
    top = paragraphs(step.intro, markdown.how_to_read(shown, measures) + " Each function's \"stop here\" line is "
                     "the command that opens it in the debugger (see the end of the page).")
    bottom = paragraphs(markdown.how_it_was_made(step, measures), debugger_note(step))
    drawing = None if step.graph is None else graph.svg(step.graph, step.graph.names)
    if drawing:
        with open(os.path.join(out_dir, f"{step.name}.svg"), "w", encoding="utf-8") as f:
            f.write(drawing)
    with open(os.path.join(out_dir, html_name), "w", encoding="utf-8") as f:
        f.write(html.render(step, shown, top, bottom, drawing))
    return measures


def main(argv=None):
    parser = command_line("demos.reading", __doc__)
    parser.add_argument("--out", required=True, help="the folder to write the pages into (made if missing)")
    parser.add_argument("--page", choices=sorted(PAGES), action="append",
                        help="this page only (default: every page)")
    parser.add_argument("--json", type=a_file_to_write, help="also write each page's measures here")
    args = parser.parse_args(argv)
    os.makedirs(args.out, exist_ok=True)
    written = {}
    for name in args.page or PAGES:
        measures = written[name] = write(PAGES[name](), args.out)
        print(f"{args.out}/{name}.md and .html: {measures['functions']} functions ({measures['one_liners']} of one "
              f"line, listed at the end), {measures['code_lines']} code lines "
              f"({measures['folded_lines']} more folded), {measures['shapes']} shapes, {measures['coverage']:.0%} of the "
              f"{measures['lines_run']} distinct lines run")
    if args.json:
        write_json(args.json, written)


if __name__ == "__main__":
    main()
