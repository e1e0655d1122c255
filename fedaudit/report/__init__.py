"""``fedaudit report RUN_DIR``: one self-contained, printable ``report.html`` per run.

The report reads only the run directory (``results.json``, ``rounds.jsonl``,
``gnq_samples.npz``, ``scores.npz``, ``scenario.toml``; :mod:`fedaudit.rundir.reading`,
docs/guide.md section 4) and embeds every figure as a base64 PNG (label histograms as tiny
inline SVG), so the file opens offline, needs no JavaScript and prints with its own
stylesheet (:mod:`fedaudit.report.style`).

The package:

* :mod:`~fedaudit.report.registry` -- the figure registry (:data:`FIGURES`,
  :class:`~fedaudit.report.registry.FigureSpec`, the ``@figure`` decorator) and rendering
  one figure;
* ``fig_training``, ``fig_attacks`` (per-client AUC, ROC), ``fig_curves`` (the curves
  attacks declare: Res-MIA's confidence decay), ``fig_gnq``,
  ``fig_quantization`` -- the figures, one module per report section;
* :mod:`~fedaudit.report.sections` -- the header and tables, and :data:`SECTIONS`;
* :mod:`~fedaudit.report.format` -- number formatting and small HTML pieces.
"""

from __future__ import annotations

import html
import re
import time
from functools import cache
from pathlib import Path

# the figure modules register their figures on import, in report order
from fedaudit.report import fig_training, fig_attacks, fig_curves  # noqa: F401
from fedaudit.report import fig_gnq, fig_quantization, fig_positions  # noqa: F401
from fedaudit.report import fig_secrets, fig_update_attacks  # noqa: F401
from fedaudit.report import fig_reconstruction, fig_threats  # noqa: F401
from fedaudit.report.registry import FIGURES, render_figure
from fedaudit.report.sections import SECTIONS, section_header
from fedaudit.report.style import CSS
from fedaudit.rundir.layout import REPORT_NAME, RESULTS_NAME
from fedaudit.rundir.reading import RunData, load_run
from fedaudit.rundir import atomic_write_text
from fedaudit.version import __version__

__all__ = ["FIGURES", "SECTIONS", "load_run", "render_html", "write_report"]


@cache
def stylesheet() -> str:
    """The report's CSS (:mod:`fedaudit.report.style`)."""
    return CSS


#: the start of a figure's caption when its scenario switched it off (``not_run``)
NOT_RUN = "Not run in this scenario"


def _not_run(block: str) -> str | None:
    """The caption of a figure its scenario switched off (an absent figure saying
    :data:`NOT_RUN`), as a paragraph that keeps its id; None for any other block."""
    m = re.fullmatch(r'<figure id="([^"]+)" class="absent"><figcaption>(.*)</figcaption>'
                     r"</figure>", block, flags=re.S)
    if m is None or NOT_RUN not in m.group(2):
        return None
    return f'<p id="{m.group(1)}" class="absent">{m.group(2)}</p>'


def render_html(run: RunData) -> str:
    """The whole report as one HTML string: the sections that show something in order, then
    the sections of what the scenario did not run, one line per figure, at the end."""
    fig_curves.register_curve_figures()  # attacks registered since the import
    parts = [section_header(run), "<nav>" + "".join(
        f'<a href="#{sid}">{html.escape(title)}</a>' for sid, title, *_ in SECTIONS) + "</nav>"]
    skipped = []
    for sid, title, intro, before, after in SECTIONS:
        head = f"<h2>{html.escape(title)}</h2>"
        if intro:
            head += f'<p class="intro">{html.escape(intro)}</p>'
        blocks = [before(run) if before is not None else ""]
        blocks += [render_figure(spec, run) for spec in FIGURES if spec.section == sid]
        blocks.append(after(run) if after is not None else "")
        blocks = [b for b in blocks if b]
        lines = [_not_run(b) for b in blocks]
        if blocks and all(lines):
            skipped.append(f'<section id="{sid}"><h3>{html.escape(title)}</h3>'
                           + "".join(lines) + "</section>")
            continue
        # the heading stays on the page of the section's first block when printed
        first = blocks.pop(0) if blocks else ""
        parts.append(f'<section id="{sid}"><div class="keep">{head}{first}</div>'
                     + "".join(blocks) + "</section>")
    if skipped:
        parts.append(f'<h2 id="not-run">{NOT_RUN}</h2>' + "".join(skipped))
    stamp = time.strftime("%Y-%m-%d %H:%M:%S")
    parts.append(f"<footer>Written by fedaudit {html.escape(str(_version()))} on {stamp} "
                 f"from {html.escape(run.path.name)}/{RESULTS_NAME}; self-contained (figures "
                 "embedded), no scripts.</footer>")
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
            f"<title>fedaudit report: {html.escape(run.name)}</title>"
            f"<style>\n{stylesheet()}</style></head><body>{''.join(parts)}</body></html>\n")


def _version() -> str:
    return __version__


def write_report(run_dir: str | Path, output: str | Path | None = None) -> Path:
    """Render ``RUN_DIR/report.html`` (or ``output``) atomically; return its path.

    Raises :class:`ScenarioError` (one line naming the path) for a directory that is not a
    finished run.
    """
    run = load_run(run_dir)
    out = Path(output) if output is not None else run.path / REPORT_NAME
    atomic_write_text(out, render_html(run))
    return out
