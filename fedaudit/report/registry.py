"""The figure registry of the report, and what every figure shares.

Figures are small functions in a registry (:data:`FIGURES`, filled by :func:`figure`):
each draws one matplotlib figure from a :class:`~fedaudit.rundir.reading.RunData` or raises
:class:`Absent` with the reason its data is missing (a disabled feature says "not run in
this scenario").  :func:`render_figure` embeds a figure as a base64 PNG; a figure that
fails unexpectedly is shown as an error box and the rest of the report is still written.

The figures themselves live in one module per report section (``fig_training``,
``fig_attacks``, ``fig_curves``, ``fig_gnq``, ``fig_quantization``); importing
:mod:`fedaudit.report` registers them, in that order.
"""

from __future__ import annotations

import base64
import html
import io
import logging
from dataclasses import dataclass
from typing import Any, Callable

from attacks.membership.registry import attack_order
from fedaudit.report.format import short
from fedaudit.rundir.reading import RunData

log = logging.getLogger("fedaudit")


class Absent(Exception):
    """The data a figure needs is not in this run; the message says why (one sentence)."""


@dataclass(frozen=True)
class FigureSpec:
    """One figure of the report: where it goes, what it shows, how to read it."""

    key: str
    section: str
    title: str
    guide: str
    draw: Callable[[RunData], Any]


FIGURES: list[FigureSpec] = []


def figure(key: str, section: str, title: str, guide: str) -> Callable:
    """Register a figure function ``draw(run) -> Figure | (Figure, note)``."""
    def deco(fn: Callable[[RunData], Any]) -> Callable[[RunData], Any]:
        FIGURES.append(FigureSpec(key, section, title, guide, fn))
        return fn
    return deco


def not_run(run: RunData, *flags: tuple[str, str], what: str) -> Absent:
    """The reason a figure is empty: "not run in this scenario" naming the disabled flag
    when the scenario says so, else "not available" naming the missing data."""
    for section, key in flags:
        if run.flag(section, key) is False:
            return Absent(f"Not run in this scenario ({section}.{key} = false).")
    return Absent(f"Not available: this run recorded no {what}.")


# ---- drawing helpers ---------------------------------------------------------------------

def method_colors(methods: list[str]) -> dict[str, Any]:
    """A fixed colour per attack method (a registered one always gets the same: its place
    in :func:`attacks.membership.registry.attack_order`)."""
    import matplotlib

    cmap = matplotlib.colormaps["tab10"]
    order = attack_order()
    fixed = {m: cmap(i % 10) for i, m in enumerate(order)}
    extra = [m for m in methods if m not in fixed]
    fixed.update({m: cmap((len(order) + i) % 10) for i, m in enumerate(extra)})
    return fixed


def new_figure(w: float, h: float):
    from matplotlib.figure import Figure

    return Figure(figsize=(w, h), layout="constrained")


def plain_log_ticks(axis) -> None:
    """Plain tick labels on a log axis: evenly spaced round ticks within one decade, 1-2-5
    ticks within two, powers of ten beyond."""
    from matplotlib.ticker import (FixedLocator, FuncFormatter, LogLocator, MaxNLocator,
                                   NullFormatter)

    lo, hi = sorted(axis.get_view_interval())
    if lo > 0 and hi / lo < 10:
        ticks = [t for t in MaxNLocator(5).tick_values(lo, hi) if lo <= t <= hi]
        axis.set_major_locator(FixedLocator(ticks))
    elif lo > 0 and hi / lo < 100:
        axis.set_major_locator(LogLocator(subs=(1.0, 2.0, 5.0)))
    axis.set_major_formatter(FuncFormatter(lambda v, _: short(v)))
    axis.set_minor_formatter(NullFormatter())


# ---- rendering ---------------------------------------------------------------------------

def png_base64(fig) -> str:
    """A matplotlib figure as a base64 PNG (no software stamp: the same figure gives the
    same bytes)."""
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=100, metadata={"Software": None})
    return base64.b64encode(buf.getvalue()).decode("ascii")


_RC = {"font.size": 9, "axes.titlesize": 9, "axes.labelsize": 9, "legend.fontsize": 8,
       "xtick.labelsize": 8, "ytick.labelsize": 8, "savefig.facecolor": "white",
       "figure.facecolor": "white"}


def draw(spec: FigureSpec, run: RunData) -> tuple[Any, str]:
    """``(Figure, note)`` of one figure under the report's matplotlib style (raises
    :class:`Absent` like the figure function)."""
    import matplotlib

    with matplotlib.rc_context(_RC):
        out = spec.draw(run)
    return out if isinstance(out, tuple) else (out, "")


def render_figure(spec: FigureSpec, run: RunData) -> str:
    """One figure as an HTML ``<figure>`` (or a note saying why it is absent)."""
    import matplotlib

    title = html.escape(spec.title)
    try:
        with matplotlib.rc_context(_RC):
            fig, note = draw(spec, run)
            data = png_base64(fig)
    except Absent as exc:
        return (f'<figure id="fig-{spec.key}" class="absent"><figcaption><b>{title}.</b> '
                f'{html.escape(str(exc))}</figcaption></figure>')
    except Exception as exc:  # noqa: BLE001 - one broken figure must not lose the report
        log.warning("report figure %s failed: %r", spec.key, exc)
        return (f'<figure id="fig-{spec.key}" class="error"><figcaption><b>{title}.</b> '
                f'This figure could not be drawn: {html.escape(type(exc).__name__)}: '
                f'{html.escape(str(exc))}</figcaption></figure>')
    note_html = f' <span class="note">{html.escape(note)}</span>' if note else ""
    return (f'<figure id="fig-{spec.key}"><img alt="{title}" '
            f'src="data:image/png;base64,{data}"><figcaption><b>{title}.</b> '
            f'{html.escape(spec.guide)}{note_html}</figcaption></figure>')
