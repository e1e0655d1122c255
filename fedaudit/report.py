"""``fedaudit report RUN_DIR``: one self-contained, printable ``report.html`` per run.

The report reads only the run directory (``results.json``, ``rounds.jsonl``,
``gnq_samples.npz``, ``scores.npz``, ``scenario.toml``; DESIGN.md section 2) and embeds
every figure as a base64 PNG (label histograms as tiny inline SVG), so the file opens
offline, needs no JavaScript and prints with its own stylesheet.

Figures are small functions in a registry (:data:`FIGURES`, filled by :func:`figure`):
each draws one matplotlib figure from a :class:`RunData` or raises :class:`Absent` with
the reason its data is missing (a disabled feature says "not run in this scenario").
A figure that fails unexpectedly is shown as an error box; the rest of the report is
still written.
"""

from __future__ import annotations

import base64
import html
import io
import json
import logging
import math
import re
import time
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import numpy as np

from fedaudit.config import ScenarioError

log = logging.getLogger("fedaudit")

REPORT_NAME = "report.html"
#: canonical order of attack methods (others follow alphabetically)
METHOD_ORDER = ("resmia", "loss", "confidence", "entropy", "mentropy", "lira", "rmia")
METHOD_LABELS = {"resmia": "Res-MIA", "loss": "LOSS", "confidence": "confidence",
                 "entropy": "entropy", "mentropy": "m-entropy", "lira": "LiRA",
                 "rmia": "RMIA"}


# ---- loading ---------------------------------------------------------------------------

def num(x: Any) -> float | None:
    """A results.json number as float (``"inf"``/``"nan"`` strings included); None if absent."""
    if x is None or isinstance(x, bool):
        return None
    if isinstance(x, (int, float)):
        return float(x)
    if isinstance(x, str):
        try:
            return float(x)
        except ValueError:
            return None
    return None


def ordered_methods(names: Any) -> list[str]:
    """Attack method names in the canonical order, unknown ones after, alphabetically."""
    names = list(dict.fromkeys(names))
    known = [m for m in METHOD_ORDER if m in names]
    return known + sorted(m for m in names if m not in METHOD_ORDER)


@dataclass
class RunData:
    """A finished run directory, loaded once; the npz files are read lazily."""

    path: Path
    results: dict[str, Any]
    rounds: list[dict[str, Any]]
    scenario: dict[str, dict[str, Any]]
    scenario_toml: str | None
    _npz: dict[str, dict[str, np.ndarray] | None] = field(default_factory=dict, repr=False)

    def npz(self, name: str) -> dict[str, np.ndarray] | None:
        """Arrays of ``name`` (e.g. ``scores.npz``), or None when the file does not exist."""
        if name not in self._npz:
            p = self.path / name
            if not p.exists():
                self._npz[name] = None
            else:
                with np.load(p, allow_pickle=False) as z:
                    self._npz[name] = {k: z[k] for k in z.files}
        return self._npz[name]

    @property
    def name(self) -> str:
        return str(self.scenario.get("scenario", {}).get("name") or self.path.name)

    def flag(self, section: str, key: str) -> Any:
        """A resolved scenario value, or None when the scenario does not record it."""
        sec = self.scenario.get(section)
        return sec.get(key) if isinstance(sec, dict) else None


def _scenario_from(results: dict[str, Any], run_dir: Path) -> tuple[dict, str | None]:
    """The resolved scenario (results.json first, scenario.toml second) and its TOML text."""
    from fedaudit.config import to_toml

    text = None
    p = run_dir / "scenario.toml"
    if p.is_file():
        try:
            text = p.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            text = None
    scen = results.get("scenario")
    if isinstance(scen, dict) and scen:
        try:
            return scen, to_toml(scen)
        except Exception:  # noqa: BLE001 - an odd value still leaves scenario.toml
            return scen, text
    if text is not None:
        try:
            raw = tomllib.loads(text)
        except tomllib.TOMLDecodeError:
            return {}, text
        flat: dict[str, dict] = {}

        def walk(prefix: str, table: dict) -> None:
            values = {k: v for k, v in table.items() if not isinstance(v, dict)}
            if prefix:
                flat[prefix] = values
            for k, v in table.items():
                if isinstance(v, dict):
                    walk(f"{prefix}.{k}" if prefix else k, v)
        walk("", raw)
        return flat, text
    return {}, None


def load_run(run_dir: str | Path) -> RunData:
    """Load a finished run directory or raise :class:`ScenarioError` (one line, names the path)."""
    from fedaudit.rundir import read_jsonl

    path = Path(run_dir)
    if not path.exists():
        raise ScenarioError(f"{path}: no such run directory")
    if not path.is_dir():
        raise ScenarioError(f"{path}: not a directory (expected a fedaudit run directory)")
    rp = path / "results.json"
    if not rp.is_file():
        raise ScenarioError(f"{path}: no results.json (not a finished fedaudit run)")
    try:
        results = json.loads(rp.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise ScenarioError(f"{rp}: not valid JSON ({exc.msg} at line {exc.lineno})") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ScenarioError(f"{rp}: cannot read: {exc}".replace("\n", " ")) from None
    if not isinstance(results, dict):
        raise ScenarioError(f"{rp}: not a fedaudit results file (expected a JSON object)")
    rounds = results.get("rounds")
    if not isinstance(rounds, list) or not rounds:
        try:
            rounds = read_jsonl(path / "rounds.jsonl")
        except (OSError, UnicodeDecodeError):
            rounds = []
    rounds = [r for r in rounds if isinstance(r, dict)]
    scenario, text = _scenario_from(results, path)
    return RunData(path=path, results=results, rounds=rounds, scenario=scenario,
                   scenario_toml=text)


# ---- the figure registry -----------------------------------------------------------------

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


def _method_colors(methods: list[str]) -> dict[str, Any]:
    import matplotlib

    cmap = matplotlib.colormaps["tab10"]
    fixed = {m: cmap(i) for i, m in enumerate(METHOD_ORDER)}
    extra = [m for m in methods if m not in fixed]
    fixed.update({m: cmap((len(METHOD_ORDER) + i) % 10) for i, m in enumerate(extra)})
    return fixed


def _new_figure(w: float, h: float):
    from matplotlib.figure import Figure

    return Figure(figsize=(w, h), layout="constrained")


def _label(m: str) -> str:
    return METHOD_LABELS.get(m, m)


def short(v: float) -> str:
    """A compact number for tick and cell labels: 1130 rather than 1.13e+03."""
    a = abs(v)
    if a == 0:
        return "0"
    if a >= 1e5 or a < 1e-3:
        return f"{v:.2g}"
    if a >= 100:
        return f"{v:.0f}"
    return f"{v:.3g}"


def _plain_log_ticks(axis) -> None:
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


# ---- figures -----------------------------------------------------------------------------

@figure("training", "training", "Training curves",
        "Read left to right: the global model's test accuracy (left) and test loss with "
        "the clients' mean training loss (right) after each federated round; a flat or "
        "falling accuracy means the federation stopped learning.")
def fig_training(run: RunData):
    rows = [r for r in run.rounds if num(r.get("round")) is not None]
    if not rows:
        raise Absent("No rounds recorded (results.json has no rounds and rounds.jsonl is "
                     "missing or empty).")
    x = [int(r["round"]) for r in rows]

    def series(key: str) -> list[float]:
        return [num(r.get(key)) if num(r.get(key)) is not None else math.nan for r in rows]

    fig = _new_figure(8.0, 2.9)
    ax1, ax2 = fig.subplots(1, 2)
    ax1.plot(x, series("test_accuracy"), "o-", color="C0")
    ax1.set_xlabel("round")
    ax1.set_ylabel("test accuracy")
    ax1.set_ylim(0, 1.02)
    ax1.grid(alpha=0.3)
    ax2.plot(x, series("test_loss"), "o-", color="C3", label="test loss (global model)")
    tl = series("train_loss")
    if any(math.isfinite(v) for v in tl):
        ax2.plot(x, tl, "s--", color="C7", label="train loss (clients, weighted mean)")
    ax2.set_xlabel("round")
    ax2.set_ylabel("loss")
    ax2.grid(alpha=0.3)
    ax2.legend(fontsize=8)
    failed = [(int(r["round"]), int(num(r.get("failures")) or 0)) for r in rows
              if (num(r.get("failures")) or 0) > 0]
    for ax in (ax1, ax2):
        ax.xaxis.get_major_locator().set_params(integer=True)
        for rd, _ in failed:
            ax.axvline(rd, color="C1", alpha=0.35, lw=3)
    note = ""
    if failed:
        note = ("Orange bands: rounds with failed client replies ("
                + ", ".join(f"round {rd}: {n}" for rd, n in failed) + ").")
    return fig, note


def _client_attacks(run: RunData) -> tuple[list[dict], list[str]]:
    clients = [c for c in run.results.get("clients") or [] if isinstance(c, dict)]
    methods = ordered_methods(m for c in clients for m in (c.get("attacks") or {}))
    if not clients or not methods:
        raise not_run(run, ("attack", "enabled"), what="per-client attack results")
    return clients, methods


@figure("client_auc", "attacks", "Attack AUC per client",
        "Each group is one client and each bar one attack, drawn from the chance level "
        "0.5 (dashed): bars above the line mean the attack tells that client's members "
        "from class-matched non-members better than a coin flip.")
def fig_client_auc(run: RunData):
    clients, methods = _client_attacks(run)
    colors = _method_colors(methods)
    n, k = len(clients), len(methods)
    fig = _new_figure(min(11.0, max(6.4, 3.0 + 0.55 * n * max(1, k) / 5)), 3.0)
    ax = fig.subplots()
    width = 0.8 / k
    x = np.arange(n)
    for i, m in enumerate(methods):
        auc = np.array([num((c.get("attacks") or {}).get(m, {}).get("auc")) or math.nan
                        for c in clients])
        ax.bar(x - 0.4 + width * (i + 0.5), auc - 0.5, width, bottom=0.5, color=colors[m],
               label=_label(m))
    ax.axhline(0.5, color="k", ls="--", lw=1)
    ax.set_xticks(x)
    step = max(1, n // 25)
    ax.set_xticklabels([str(c.get("client", i)) if i % step == 0 else ""
                        for i, c in enumerate(clients)])
    ax.set_xlabel("client")
    ax.set_ylabel("AUC")
    ax.set_xlim(-0.6, n - 0.4)
    vals = [num((c.get("attacks") or {}).get(m, {}).get("auc")) for c in clients
            for m in methods]
    vals = [v for v in vals if v is not None and math.isfinite(v)]
    if vals:  # always show 0.5; pad the observed range, at least +-0.05 around chance
        lo_v, hi_v = min(min(vals), 0.5), max(max(vals), 0.5)
        pad = max(0.02, 0.12 * (hi_v - lo_v))
        ax.set_ylim(max(0.0, min(lo_v - pad, 0.45)), min(1.0, max(hi_v + pad, 0.55)))
    ax.grid(axis="y", alpha=0.3)
    fig.legend(*ax.get_legend_handles_labels(), ncols=min(k, 5), fontsize=8,
               loc="outside lower center", frameon=False)
    return fig


@figure("roc", "attacks", "ROC curves (global model, pooled over clients), log-log",
        "Each curve trades the fraction of members found (TPR) against non-members wrongly "
        "flagged (FPR) on log axes, so the low-FPR regime that matters for privacy is "
        "visible; the dotted diagonal is chance, and a curve well above it at FPR 1% or "
        "0.1% is a real leak even when the AUC is close to 0.5.")
def fig_roc(run: RunData):
    from sklearn.metrics import auc as sk_auc
    from sklearn.metrics import roc_curve

    scores = run.npz("scores.npz")
    if scores is None:
        raise not_run(run, ("attack", "enabled"), what="scores.npz")
    glob = scores["target"] == "global"
    if not glob.any():
        raise Absent("Not run in this scenario (the global model was not attacked; "
                     "attack.targets has no 'global').")
    methods = ordered_methods(np.unique(scores["method"][glob]).tolist())
    colors = _method_colors(methods)
    fig = _new_figure(5.6, 4.4)
    ax = fig.subplots()
    lo, dropped = 1.0, 0
    curves: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    for m in methods:
        sel = glob & (scores["method"] == m)
        y, s = scores["member"][sel].astype(int), scores["score"][sel].astype(float)
        ok = np.isfinite(s)
        dropped += int((~ok).sum())
        y, s = y[ok], s[ok]
        if len(np.unique(y)) < 2:
            continue
        fpr, tpr, _ = roc_curve(y, s)
        curves[m] = (fpr, tpr)
        n_neg, n_pos = int((y == 0).sum()), int((y == 1).sum())
        lo = min(lo, 1.0 / n_neg, 1.0 / n_pos)
        auc = sk_auc(fpr, tpr)
        t1 = tpr[fpr <= 0.01].max() if (fpr <= 0.01).any() else 0.0
        keep = (fpr > 0) & (tpr > 0)
        ax.plot(fpr[keep], tpr[keep], color=colors[m], lw=1.4,
                label=f"{_label(m)}  AUC {auc:.3f}, TPR@1% {t1:.3f}",
                drawstyle="steps-post")
    if lo == 1.0:
        raise Absent("The global-model scores hold a single class (no ROC curve possible).")
    grid = np.logspace(np.log10(lo), 0, 50)
    ax.plot(grid, grid, ":", color="k", lw=1, label="chance")
    for f, lab in ((0.01, "1% FPR"), (0.001, "0.1% FPR")):
        if f >= 2 * lo:  # a label at the axis edge would sit on the tick labels
            ax.axvline(f, color="0.6", lw=0.8)
            ax.text(f, lo * 1.15, f" {lab}", fontsize=7, color="0.35", rotation=90,
                    va="bottom", ha="right")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(lo, 1)
    ax.set_ylim(lo, 1.05)
    ax.set_xlabel("false positive rate")
    ax.set_ylabel("true positive rate")
    ax.grid(alpha=0.3, which="major")
    ax.legend(fontsize=7.5, loc="lower right")
    note = (f"Lowest meaningful FPR here: 1/{round(1 / lo)} = {lo:.2g} (one non-member); "
            "points with FPR or TPR exactly 0 are not drawn on log axes.")
    same = [(a, b) for i, a in enumerate(curves) for b in list(curves)[i + 1:]
            if curves[a][0].shape == curves[b][0].shape
            and np.array_equal(curves[a][0], curves[b][0])
            and np.array_equal(curves[a][1], curves[b][1])]
    if same:
        note += (" Identical curves (the attacks rank the samples the same way) hide each "
                 "other: " + ", ".join(f"{_label(a)} = {_label(b)}" for a, b in same) + ".")
    if dropped:
        note += f" {dropped} non-finite scores were left out."
    return fig, note


@figure("resmia_curves", "attacks", "Res-MIA confidence decay",
        "Confidence in the predicted class as the image is eroded step by step (left; "
        "step 0 is the original image) and the member minus non-member gap (right): "
        "Res-MIA scores membership by how much faster members lose confidence.")
def fig_resmia(run: RunData):
    curves = run.results.get("resmia_curves")
    if not isinstance(curves, dict) or not curves.get("members") or not curves.get("nonmembers"):
        methods = run.flag("attack", "methods")
        if run.flag("attack", "enabled") is not False and isinstance(methods, list) \
                and "resmia" not in methods:
            raise Absent("Not run in this scenario (attack.methods has no 'resmia').")
        raise not_run(run, ("attack", "enabled"), what="Res-MIA curves")
    mem = np.array([num(v) for v in curves["members"]], dtype=float)
    non = np.array([num(v) for v in curves["nonmembers"]], dtype=float)
    k = min(len(mem), len(non))
    mem, non = mem[:k], non[:k]
    steps = np.arange(k)
    fig = _new_figure(8.0, 2.9)
    ax1, ax2 = fig.subplots(1, 2)
    ax1.plot(steps, mem, "o-", color="C3", label="members")
    ax1.plot(steps, non, "s--", color="C0", label="non-members")
    ax1.set_ylabel("mean confidence f_y*(x_k)")
    ax1.set_ylim(0, 1.02)
    ax1.legend(fontsize=8)
    ax2.bar(steps, mem - non, color=np.where(mem - non >= 0, "C3", "C0"), width=0.6)
    ax2.axhline(0, color="k", lw=0.8)
    ax2.set_ylabel("members - non-members")
    labels = _erosion_labels(run, k)
    for ax in (ax1, ax2):
        ax.set_xticks(steps)
        ax.set_xticklabels(labels, fontsize=8)
        ax.set_xlabel("erosion step k (image size)")
        ax.grid(alpha=0.3)
    return fig


def _erosion_labels(run: RunData, k: int) -> list[str]:
    """``k (size)`` tick labels when the sizes are known, else the step number."""
    shape = (run.results.get("data") or {}).get("shape")
    sizes: list[int] | None = None
    explicit = run.flag("attack.resmia", "sizes")
    if isinstance(shape, list) and len(shape) >= 2 and isinstance(shape[-1], int):
        h = int(shape[-1])
        if isinstance(explicit, list) and explicit and len(explicit) == k - 1:
            sizes = [h, *explicit]
        elif not explicit:
            sizes = [h] + [math.ceil(h / 2 ** i) for i in range(1, k)]
    if sizes is None:
        return [str(i) for i in range(k)]
    return [f"{i}\n({s}x{s})" for i, s in enumerate(sizes)]


@figure("gnq_update", "gnq", "Server-side GNQ of each client's update, per round",
        "Each cell is how unique one client's model update was among that round's updates "
        "(log colour scale; grey = client not sampled): a row that stays bright marks a "
        "client whose data pulls the model somewhere the others do not.")
def fig_gnq_update(run: RunData):
    clients = [c for c in run.results.get("clients") or [] if isinstance(c, dict)]
    rows = [[num(v) for v in (c.get("gnq") or {}).get("update_per_round") or []]
            for c in clients]
    if not rows or not any(v is not None for r in rows for v in r):
        raise not_run(run, ("audit.gnq", "server"), what="update GNQ")
    n_rounds = max(len(r) for r in rows)
    m = np.full((len(rows), n_rounds), np.nan)
    for i, r in enumerate(rows):
        m[i, :len(r)] = [np.nan if v is None else v for v in r]
    from matplotlib.colors import LogNorm, Normalize

    finite = m[np.isfinite(m)]
    pos = finite[finite > 0]
    norm = (LogNorm(vmin=pos.min(), vmax=max(pos.max(), pos.min() * 1.0001))
            if len(pos) == len(finite) and len(pos) else Normalize())
    import matplotlib

    cmap = matplotlib.colormaps["viridis"].with_extremes(bad="0.85")
    n_c = len(rows)
    fig = _new_figure(min(10.0, 3.2 + 0.55 * n_rounds), min(9.0, 1.3 + 0.28 * n_c))
    ax = fig.subplots()
    im = ax.imshow(np.ma.masked_invalid(m), aspect="auto", cmap=cmap, norm=norm,
                   interpolation="nearest")
    cbar = fig.colorbar(im, ax=ax, label="update GNQ", shrink=0.9)
    if isinstance(norm, LogNorm):
        _plain_log_ticks(cbar.ax.yaxis)
    ax.set_xticks(range(n_rounds))
    ax.set_xticklabels([str(i + 1) for i in range(n_rounds)])
    ystep = max(1, n_c // 30)
    ax.set_yticks(range(0, n_c, ystep))
    ax.set_yticklabels([str(clients[i].get("client", i)) for i in range(0, n_c, ystep)])
    if n_rounds > 20:
        xstep = max(1, n_rounds // 20)
        ax.set_xticks(range(0, n_rounds, xstep))
        ax.set_xticklabels([str(i + 1) for i in range(0, n_rounds, xstep)])
    ax.set_xlabel("round")
    ax.set_ylabel("client")
    if n_c * n_rounds <= 200:
        mid = np.sqrt(norm.vmin * norm.vmax) if isinstance(norm, LogNorm) else None
        for i in range(n_c):
            for j in range(n_rounds):
                v = m[i, j]
                if np.isfinite(v):
                    dark = mid is not None and v < mid
                    ax.text(j, i, short(v), ha="center", va="center", fontsize=7,
                            color="white" if dark else "black")
    return fig


def _sample_means(run: RunData) -> dict[str, np.ndarray]:
    g = run.npz("gnq_samples.npz")
    if g is None or not len(g.get("score", [])):
        raise not_run(run, ("audit.gnq", "client"), what="per-sample GNQ (gnq_samples.npz)")
    uniq, inv = np.unique(g["sample_id"], return_inverse=True)
    counts = np.bincount(inv)
    mean = np.bincount(inv, weights=g["score"].astype(float)) / counts
    canary = np.zeros(len(uniq), bool)
    if "canary" in g:
        canary[inv[g["canary"].astype(bool)]] = True
    client = np.zeros(len(uniq), np.int64)
    client[inv] = g["client"]
    return {"sample_id": uniq, "mean": mean, "canary": canary, "client": client}


@figure("gnq_samples", "gnq", "Per-sample GNQ (client side, mean over rounds)",
        "The histogram counts training samples by how unique their gradient was within "
        "their batch (log x axis); canaries (red lines) far in the right tail mean GNQ "
        "finds the planted outliers without running any attack.")
def fig_gnq_samples(run: RunData):
    s = _sample_means(run)
    mean, canary = s["mean"], s["canary"]
    ok = np.isfinite(mean) & (mean > 0)
    if not ok.any():
        raise Absent("Every per-sample GNQ is zero or non-finite (nothing to draw on a log "
                     "axis).")
    vals = mean[ok]
    bins = np.logspace(np.log10(vals.min()), np.log10(vals.max() * 1.0001), 40)
    fig = _new_figure(6.4, 2.9)
    ax = fig.subplots()
    ax.hist(mean[ok & ~canary], bins=bins, color="C0", alpha=0.85,
            label=f"samples ({int((ok & ~canary).sum())})")
    cm = mean[ok & canary]
    for i, v in enumerate(cm):
        ax.axvline(v, color="C3", lw=1.3, label=f"canaries ({len(cm)})" if i == 0 else None)
    if len(cm):
        ax.plot(cm, np.full(len(cm), 1.0), "v", color="C3", ms=7, clip_on=False,
                transform=ax.get_xaxis_transform())
    ax.set_xscale("log")
    ax.set_xlabel("GNQ (mean over the rounds a sample was scored)")
    ax.set_ylabel("samples")
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3)
    note = ""
    if (~ok).any():
        note = f"{int((~ok).sum())} samples with GNQ 0 or non-finite are not drawn."
    return fig, note


def _rqn_entries(run: RunData) -> list[dict]:
    q = [e for e in run.results.get("quantization") or [] if isinstance(e, dict)]
    if not q:
        raise not_run(run, ("audit.quantization", "enabled"), what="quantization results")
    return q


@figure("quantization", "quantization", "Post-training quantization: r_Qn, accuracy and "
        "attack AUC per quantizer",
        "Read the three panels column by column: a quantizer is a good release when its "
        "r_Qn (top, larger = more secure) is high, its test accuracy (middle) stays close "
        "to fp32 and the attacks' AUC on it (bottom) stays near 0.5.")
def fig_quantization(run: RunData):
    entries = _rqn_entries(run)
    names = [str(e.get("quantizer")) for e in entries]
    x = np.arange(len(entries))
    rq = [num(e.get("rqn")) for e in entries]
    fig = _new_figure(min(10.0, max(6.4, 3.0 + 0.75 * len(entries))), 6.4)
    ax1, ax2, ax3 = fig.subplots(3, 1, sharex=True)
    finite = [v for v in rq if v is not None and math.isfinite(v)]
    log_axis = bool(finite) and min(finite) > 0
    if log_axis:
        ax1.set_yscale("log")
        top = max(finite) * 3.0
        bottom = min(finite) / 2.0
    else:
        top = (max(finite) * 1.3 if finite and max(finite) > 0 else 1.0)
        bottom = 0.0
    inf_idx = [i for i, v in enumerate(rq) if v is not None and math.isinf(v) and v > 0]
    fin_idx = [i for i, v in enumerate(rq) if v is not None and math.isfinite(v)]
    ax1.plot(x[fin_idx], [rq[i] for i in fin_idx], "o", color="C2", ms=7, label="r_Qn")
    if inf_idx:
        ax1.plot(x[inf_idx], [top] * len(inf_idx), "^", color="C2", ms=9, mfc="white",
                 mew=2, clip_on=False, label="r_Qn = inf (drawn at the top)")
        for i in inf_idx:
            ax1.annotate("inf", (x[i], top), textcoords="offset points", xytext=(0, -14),
                         ha="center", fontsize=8, color="C2")
    ax1.set_ylim(bottom, top)
    if log_axis:
        _plain_log_ticks(ax1.yaxis)
    ax1.set_ylabel("r_Qn")
    ax1.grid(alpha=0.3)
    if inf_idx:
        ax1.legend(fontsize=7.5, loc="lower left")
    acc = [num(e.get("test_accuracy")) for e in entries]
    ax2.bar(x, [a if a is not None else math.nan for a in acc], color="C0", width=0.6)
    ref = next((a for e, a in zip(entries, acc) if e.get("quantizer") == "fp32"), None)
    if ref is None:
        ref = num((run.results.get("model") or {}).get("test_accuracy"))
    if ref is not None:
        ax2.axhline(ref, color="k", ls=":", lw=1)
        ax2.set_title(f"dotted line: unquantized model ({ref:.3f})", loc="right",
                      fontsize=7.5, color="0.3", pad=2)
    ax2.set_ylim(0, 1.02)
    ax2.set_ylabel("test accuracy")
    ax2.grid(axis="y", alpha=0.3)
    methods = ordered_methods(m for e in entries for m in (e.get("attacks") or {}))
    colors = _method_colors(methods)
    for m in methods:
        auc = [num((e.get("attacks") or {}).get(m, {}).get("auc")) for e in entries]
        ax3.plot(x, [a if a is not None else math.nan for a in auc], "o-", color=colors[m],
                 label=_label(m), ms=4)
    ax3.axhline(0.5, color="k", ls="--", lw=1)
    if not methods:
        ax3.text(0.5, 0.5, "quantized releases were not attacked in this scenario",
                 transform=ax3.transAxes, ha="center", va="center", fontsize=9, color="0.4")
    else:
        fig.legend(*ax3.get_legend_handles_labels(), fontsize=7.5,
                   ncols=min(len(methods), 5), loc="outside lower center", frameon=False)
    ax3.set_ylabel("attack AUC")
    ax3.grid(alpha=0.3)
    ax3.set_xticks(x)
    ax3.set_xticklabels(names, rotation=25, ha="right", fontsize=8)
    note = ""
    if inf_idx:
        note = ("r_Qn = inf (fewer than two distinct quantized candidates or no variance "
                "in the loss differences) for: " + ", ".join(names[i] for i in inf_idx)
                + "; drawn as open triangles at the top of the panel.")
    return fig, note


# ---- rendering -----------------------------------------------------------------------------

def _png(fig) -> str:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=100, metadata={"Software": None})
    return base64.b64encode(buf.getvalue()).decode("ascii")


_RC = {"font.size": 9, "axes.titlesize": 9, "axes.labelsize": 9, "legend.fontsize": 8,
       "xtick.labelsize": 8, "ytick.labelsize": 8, "savefig.facecolor": "white",
       "figure.facecolor": "white"}


def render_figure(spec: FigureSpec, run: RunData) -> str:
    """One figure as an HTML ``<figure>`` (or a note saying why it is absent)."""
    import matplotlib

    title = html.escape(spec.title)
    try:
        with matplotlib.rc_context(_RC):
            out = spec.draw(run)
            fig, note = out if isinstance(out, tuple) else (out, "")
            data = _png(fig)
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


def fmt(x: Any, digits: int = 3) -> str:
    """A number for a table cell: fixed digits, 'inf' as the infinity sign, None as a dash."""
    v = num(x)
    if v is None:
        return "–"
    if math.isnan(v):
        return "nan"
    if math.isinf(v):
        return "∞" if v > 0 else "−∞"
    return f"{v:.{digits}f}"


def fmt_g(x: Any) -> str:
    v = num(x)
    if v is None:
        return "–"
    if math.isinf(v):
        return "∞" if v > 0 else "−∞"
    if 1e4 <= abs(v) < 1e9:
        return f"{v:,.0f}"
    return f"{v:.4g}"


def sparkline(counts: list[Any], width: int = 64, height: int = 16) -> str:
    """A tiny inline-SVG bar chart of a label histogram (counts in its title)."""
    c = [int(num(v) or 0) for v in counts]
    if not c:
        return "–"
    top = max(c) or 1
    bw = width / len(c)
    bars = "".join(
        f'<rect x="{i * bw:.2f}" y="{height - max(1.0, v / top * height):.2f}" '
        f'width="{max(bw - 0.6, 0.6):.2f}" height="{max(1.0, v / top * height):.2f}"/>'
        for i, v in enumerate(c))
    text = " ".join(f"{i}:{v}" for i, v in enumerate(c))
    return (f'<svg class="spark" width="{width}" height="{height}" '
            f'viewBox="0 0 {width} {height}" role="img" aria-label="label histogram {text}">'
            f'<title>label histogram (class:count) {text}</title>{bars}</svg>')


def _table(header: list[str], rows: list[list[str]], cls: str = "",
           text_cols: tuple[int, ...] = ()) -> str:
    """A plain HTML table; ``text_cols`` (indices, negative allowed) are left-aligned."""
    head = "".join(f"<th>{h}</th>" for h in header)
    n = len(header)
    left = {i % n for i in text_cols} if n else set()
    body = "".join("<tr>" + "".join(
        f'<td class="t">{c}</td>' if i in left else f"<td>{c}</td>"
        for i, c in enumerate(r)) + "</tr>" for r in rows)
    return f'<table class="{cls}"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'


def _auc_style(v: float | None) -> str:
    """A light red background that deepens as the AUC leaves 0.5 upwards."""
    if v is None or not math.isfinite(v) or v <= 0.5:
        return ""
    a = min(1.0, (v - 0.5) / 0.25)
    return f' style="background:rgba(214,39,40,{0.08 + 0.5 * a:.2f})"'


def section_header(run: RunData) -> str:
    """Title, run facts and the key numbers."""
    r = run.results
    scen = run.scenario.get("scenario", {})
    data = r.get("data") or {}
    fed = run.scenario.get("federation", {})
    facts = [("run directory", html.escape(str(run.path.resolve()))),
             ("fedaudit", html.escape(str(r.get("fedaudit_version", "?")))),
             ("seed", html.escape(str(r.get("seed", scen.get("seed", "?")))))]
    if data:
        facts.append(("data", html.escape(
            f"{data.get('dataset', '?')}: {data.get('train', '?')} train / "
            f"{data.get('holdout', '?')} holdout / {data.get('test', '?')} test, "
            f"{data.get('num_classes', '?')} classes")))
    if fed:
        facts.append(("federation", html.escape(
            f"{fed.get('num_clients', '?')} clients, {fed.get('rounds', '?')} rounds, "
            f"{fed.get('strategy', '?')}, partition "
            f"{run.scenario.get('data', {}).get('partitioner', '?')}")))
    defense = (run.scenario.get("defense") or {}).get("kind")
    if defense:
        facts.append(("defense", html.escape(str(defense))))
    facts_html = "".join(f"<dt>{k}</dt><dd>{v}</dd>" for k, v in facts)

    cards = []
    model = r.get("model") or {}
    cards.append(("test accuracy", fmt(model.get("test_accuracy")),
                  f"loss {fmt(model.get('test_loss'))}"))
    for m in ordered_methods(r.get("attacks") or {}):
        a = r["attacks"][m] or {}
        cards.append((f"{_label(m)} AUC", fmt(a.get("auc")),
                      f"TPR@1%FPR {fmt(a.get('tpr_at_1pct_fpr'))}"))
    if not r.get("attacks"):
        cards.append(("attacks", "–", "not run in this scenario"))
    t = r.get("timing") or {}
    if t:
        parts = [f"{k.replace('_seconds', '')} {num(v):.0f} s" for k, v in t.items()
                 if k != "total_seconds" and num(v) is not None]
        cards.append(("total time", f"{num(t.get('total_seconds')) or 0:.0f} s",
                      ", ".join(parts)))
    failures = sum(int(num(x.get("failures")) or 0) for x in run.rounds)
    if failures:
        cards.append(("failed replies", str(failures), "see the training curves"))
    cards_html = "".join(f'<div class="card"><div class="k">{html.escape(k)}</div>'
                         f'<div class="v">{html.escape(v)}</div>'
                         f'<div class="s">{html.escape(s)}</div></div>' for k, v, s in cards)
    desc = html.escape(str(scen.get("description", "")))
    warns = [w for w in run.results.get("warnings") or [] if isinstance(w, dict)]
    warn_html = "".join(f'<p class="warning" role="alert"><strong>Warning:</strong> '
                        f'{html.escape(str(w.get("message", "")))}</p>' for w in warns)
    return (f'<header><h1>fedaudit report: {html.escape(run.name)}</h1>{warn_html}'
            f'<p class="desc">{desc}</p><dl class="facts">{facts_html}</dl>'
            f'<div class="cards">{cards_html}</div></header>')


def section_attack_table(run: RunData) -> str:
    """Pooled metrics per attack on the global model."""
    att = run.results.get("attacks") or {}
    if not att:
        return ""
    rows = []
    for m in ordered_methods(att):
        a = att[m] or {}
        rows.append([_label(m), fmt(a.get("auc")), fmt(a.get("tpr_at_1pct_fpr")),
                     fmt(a.get("tpr_at_0p1pct_fpr")), fmt(a.get("fpr_at_80pct_tpr")),
                     fmt_g(a.get("min_fpr_resolution")), fmt_g(a.get("queries_per_sample")),
                     fmt_g((num(a.get("seconds_per_sample")) or math.nan) * 1e3)])
    return ("<h3>Pooled over clients (global model)</h3>"
            + _table(["attack", "AUC", "TPR@1%FPR", "TPR@0.1%FPR", "FPR@80%TPR",
                      "lowest FPR", "queries/sample", "ms/sample"], rows, "num"))


def section_gnq_tables(run: RunData) -> str:
    """Canary ranks and the GNQ-vs-attack links."""
    out = []
    can = run.results.get("canaries")
    if isinstance(can, dict) and can.get("samples"):
        rows = [[str(c.get("sample_id")), str(c.get("client")), fmt_g(c.get("gnq_mean")),
                 fmt(c.get("percentile"), 1)] for c in can["samples"]]
        out.append("<h3>Canaries</h3><p>Percentile of each canary's mean GNQ among its "
                   "client's samples (100 = the most unique sample); mean percentile "
                   f"{fmt(can.get('mean_percentile'), 1)}.</p>"
                   + _table(["sample id", "client", "mean GNQ", "percentile"], rows, "num"))
    link = run.results.get("gnq_vs_attack")
    if isinstance(link, dict) and link:
        items = []
        c = link.get("client_update_gnq_vs_resmia_auc")
        if isinstance(c, dict):
            items.append(f"<li>Per client, update GNQ (total over rounds) vs Res-MIA AUC: "
                         f"Spearman {fmt(c.get('spearman'), 2)} (p = {fmt_g(c.get('pvalue'))}, "
                         f"{c.get('n_clients', '?')} clients).</li>")
        s = link.get("sample_top5pct_gnq_resmia_tpr")
        if isinstance(s, dict):
            items.append(f"<li>Per sample, at a Res-MIA threshold with FPR "
                         f"{fmt(s.get('fpr'))}: TPR {fmt(s.get('tpr_top5pct_gnq'))} on the "
                         f"{s.get('n_top', '?')} members with the top-5% GNQ vs "
                         f"{fmt(s.get('tpr_all_members'))} on all {s.get('n_members', '?')} "
                         f"members.</li>")
        if items:
            out.append("<h3>Does GNQ point where the attack hits?</h3><ul>"
                       + "".join(items) + "</ul>")
    return "".join(out)


def section_quant_table(run: RunData) -> str:
    """One row per quantizer, and the r_Qn-vs-attack rank correlations."""
    entries = [e for e in run.results.get("quantization") or [] if isinstance(e, dict)]
    if not entries:
        return ""
    methods = ordered_methods(m for e in entries for m in (e.get("attacks") or {}))
    rows = []
    for e in entries:
        note = e.get("rqn_note")
        rows.append([html.escape(str(e.get("quantizer"))), fmt_g(e.get("bits")),
                     fmt_g(e.get("sparsity")), fmt_g(e.get("rqn")),
                     f"{e.get('n_distinct', '–')}/{e.get('n_candidates', '–')}",
                     fmt(e.get("test_accuracy"))]
                    + [fmt((e.get("attacks") or {}).get(m, {}).get("auc")) for m in methods]
                    + [html.escape(str(note)) if note else ""])
    out = ("<h3>Per quantizer</h3>"
           + _table(["quantizer", "bits", "sparsity", "r_Qn", "distinct/candidates",
                     "test acc"] + [f"{_label(m)} AUC" for m in methods] + ["note"],
                    rows, "num", text_cols=(-1,)))
    corr = run.results.get("rqn_vs_attack")
    if isinstance(corr, dict) and corr:
        crow = [[_label(m), fmt(v.get("spearman"), 2), fmt_g(v.get("pvalue")),
                 str(v.get("n", "–")), html.escape(str(v.get("note") or ""))]
                for m, v in ((m, corr[m] or {}) for m in ordered_methods(corr))]
        out += ("<h3>Does r_Qn rank the quantizers like the attacks do?</h3><p>Spearman "
                "correlation between r_Qn and attack AUC across quantizers; the paper's "
                "claim (higher r_Qn, lower AUC) predicts a negative value.</p>"
                + _table(["attack", "Spearman", "p-value", "quantizers", "note"], crow, "num",
                         text_cols=(-1,)))
    return out


def section_clients(run: RunData) -> str:
    """The per-client table."""
    clients = [c for c in run.results.get("clients") or [] if isinstance(c, dict)]
    if not clients:
        return '<p class="absent">No per-client results recorded in this run.</p>'
    methods = ordered_methods(m for c in clients for m in (c.get("attacks") or {}))
    canaries: dict[int, int] = {}
    can = run.results.get("canaries")
    if isinstance(can, dict):
        for s in can.get("samples") or []:
            canaries[s.get("client")] = canaries.get(s.get("client"), 0) + 1
    head1 = ('<tr><th rowspan="2">client</th><th rowspan="2">examples</th>'
             '<th rowspan="2">labels</th><th colspan="2">GNQ</th>'
             + (f'<th rowspan="2">canaries</th>' if canaries else "")
             + "".join(f'<th colspan="2">{_label(m)}</th>' for m in methods) + "</tr>")
    head2 = ("<tr><th>update total</th><th>sample mean</th>"
             + "".join("<th>AUC</th><th>TPR@1%</th>" for _ in methods) + "</tr>")
    body = []
    for c in clients:
        g = c.get("gnq") or {}
        a = c.get("attacks") or {}
        cells = [html.escape(str(c.get("client", "?"))), fmt_g(c.get("num_examples")),
                 sparkline(c.get("label_histogram") or []), fmt_g(g.get("update_total")),
                 fmt_g(g.get("sample_mean"))]
        if canaries:
            cells.append(str(canaries.get(c.get("client"), 0)))
        tds = "".join(f"<td>{x}</td>" for x in cells)
        for m in methods:
            auc = num((a.get(m) or {}).get("auc"))
            tds += (f"<td{_auc_style(auc)}>{fmt(auc)}</td>"
                    f"<td>{fmt((a.get(m) or {}).get('tpr_at_1pct_fpr'))}</td>")
        body.append(f"<tr>{tds}</tr>")
    res = [num((a or {}).get("min_fpr_resolution")) for c in clients
           for a in (c.get("attacks") or {}).values()]
    res = [v for v in res if v is not None]
    note = ""
    if res:
        span = f"{min(res):.2g}" + (f" to {max(res):.2g}" if max(res) > min(res) else "")
        note = (f" The lowest FPR a client's evaluation can resolve is 1/n non-members "
                f"({span} here); TPR@1% is only meaningful where that is at most 0.01.")
    if not methods:
        note += (" Attack columns: " + str(not_run(run, ("attack", "enabled"),
                                                   what="per-client attack results")))
    return ('<p class="guide">One row per client: its size, label histogram (bars per '
            'class; hover for counts), how unique its updates and samples were (GNQ), and '
            'every attack\'s AUC (shaded as it rises above 0.5) and TPR at 1% FPR on its '
            f'members vs class-matched non-members.{html.escape(note)}</p>'
            f'<div class="scroll"><table class="num clients"><thead>{head1}{head2}</thead>'
            f'<tbody>{"".join(body)}</tbody></table></div>')


def section_scenario(run: RunData) -> str:
    if not run.scenario_toml:
        return '<p class="absent">The resolved scenario was not recorded in this run.</p>'
    # one block per TOML table, so a column or page break never splits a table
    blocks = re.split(r"\n\s*\n(?=\[)", run.scenario_toml.strip())
    pres = "".join(f"<pre>{html.escape(b)}</pre>" for b in blocks)
    return ('<p class="guide">Every key with its resolved value (defaults filled in); '
            'rerun with <code>fedaudit run scenario.toml</code> from the run directory.</p>'
            f'<div class="toml">{pres}</div>')


#: (id, heading, intro, extra HTML before the figures, extra HTML after)
SECTIONS: list[tuple[str, str, str, Callable[[RunData], str] | None,
                     Callable[[RunData], str] | None]] = [
    ("training", "Training", "The global model after each federated round.", None, None),
    ("attacks", "Membership inference", "Black-box attacks on the global model: members "
     "are each client's training samples, non-members are holdout samples with the same "
     "label histogram.", section_attack_table, None),
    ("gnq", "Gradient uniqueness (GNQ)", "How much each client's update, and each sample's "
     "gradient, stands out from the rest of its round or batch.", None, section_gnq_tables),
    ("quantization", "Post-training quantization and r_Qn", "Each quantizer applied to the "
     "released global model; r_Qn is the attack-free membership-inference-security "
     "indicator computed from the quantized training trajectory.", None, section_quant_table),
    ("clients", "Per-client table", "", section_clients, None),
    ("scenario", "Resolved scenario", "", section_scenario, None),
]

CSS = """
:root{--fg:#1d1f21;--mute:#5c6370;--line:#d8dbe0;--bg2:#f5f6f8}
*{box-sizing:border-box}
body{font-family:system-ui,-apple-system,"Segoe UI",Roboto,"Helvetica Neue",Arial,sans-serif;
 color:var(--fg);margin:0 auto;max-width:1180px;padding:24px 28px;line-height:1.45;font-size:14px}
h1{font-size:24px;margin:0 0 4px}h2{font-size:19px;margin:34px 0 6px;padding-top:10px;
 border-top:2px solid var(--line)}h3{font-size:15px;margin:18px 0 6px}
p.desc{color:var(--mute);margin:0 0 12px}
dl.facts{display:grid;grid-template-columns:max-content 1fr;gap:2px 14px;margin:0 0 14px}
dl.facts dt{color:var(--mute)}dl.facts dd{margin:0;word-break:break-all}
.cards{display:flex;flex-wrap:wrap;gap:10px}
.card{border:1px solid var(--line);border-radius:6px;padding:8px 12px;min-width:130px;
 background:var(--bg2)}
.card .k{font-size:12px;color:var(--mute)}.card .v{font-size:21px;font-weight:600}
.card .s{font-size:11.5px;color:var(--mute)}
nav{margin:18px 0 0;font-size:13px}nav a{margin-right:14px;color:#2b5797}
figure{margin:14px 0 22px;break-inside:avoid;page-break-inside:avoid}
figure img{max-width:100%;height:auto;display:block;border:1px solid var(--line)}
figcaption{font-size:13px;margin-top:6px;max-width:900px}
figcaption .note{color:var(--mute)}
.warning{border:2px solid #b45309;background:#fff7ed;padding:.5em .8em;border-radius:4px}
figure.absent figcaption,p.absent{color:var(--mute);font-style:italic;background:var(--bg2);
 padding:8px 12px;border-left:3px solid var(--line)}
figure.error figcaption{background:#fdecea;padding:8px 12px;border-left:3px solid #c62828}
p.guide,p.intro{max-width:900px}
table{border-collapse:collapse;font-size:12.5px;margin:6px 0 10px}
th,td{border:1px solid var(--line);padding:3px 7px;text-align:left;vertical-align:middle}
th{background:var(--bg2);font-weight:600}
table.num td{text-align:right;font-variant-numeric:tabular-nums}
table.num td:first-child,table.num td.t{text-align:left}
.scroll{overflow-x:auto}
table.clients{font-size:12px}table.clients th,table.clients td{padding:2px 5px}
svg.spark{display:block;fill:#4c78a8}
div.toml{background:var(--bg2);border:1px solid var(--line);padding:10px 14px;
 column-width:330px;column-gap:28px;column-rule:1px solid var(--line)}
div.toml pre{margin:0 0 12px;font-size:12px;white-space:pre-wrap;overflow-wrap:anywhere;
 break-inside:avoid;page-break-inside:avoid}
footer{margin-top:30px;color:var(--mute);font-size:12px}
@media print{
 @page{size:A4;margin:14mm 12mm}
 body{max-width:none;padding:0;font-size:10.5pt}
 nav{display:none}
 h2{break-after:avoid;page-break-after:avoid}
 .keep{break-inside:avoid;page-break-inside:avoid}
 h3{break-after:avoid}
 section{break-before:auto}
 .scroll{overflow:visible}
 table{font-size:8.5pt}
 .card{background:none}
 figure img{border:none;max-height:235mm;width:auto;max-width:100%}
 tr{break-inside:avoid}
}
"""


def render_html(run: RunData) -> str:
    """The whole report as one HTML string."""
    parts = [section_header(run), "<nav>" + "".join(
        f'<a href="#{sid}">{html.escape(title)}</a>' for sid, title, *_ in SECTIONS) + "</nav>"]
    for sid, title, intro, before, after in SECTIONS:
        head = f"<h2>{html.escape(title)}</h2>"
        if intro:
            head += f'<p class="intro">{html.escape(intro)}</p>'
        blocks = [before(run) if before is not None else ""]
        blocks += [render_figure(spec, run) for spec in FIGURES if spec.section == sid]
        blocks.append(after(run) if after is not None else "")
        blocks = [b for b in blocks if b]
        # the heading stays on the page of the section's first block when printed
        first = blocks.pop(0) if blocks else ""
        parts.append(f'<section id="{sid}"><div class="keep">{head}{first}</div>'
                     + "".join(blocks) + "</section>")
    stamp = time.strftime("%Y-%m-%d %H:%M:%S")
    parts.append(f"<footer>Written by fedaudit {html.escape(str(_version()))} on {stamp} "
                 f"from {html.escape(run.path.name)}/results.json; self-contained (figures "
                 "embedded), no scripts.</footer>")
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
            f"<title>fedaudit report: {html.escape(run.name)}</title>"
            f"<style>{CSS}</style></head><body>{''.join(parts)}</body></html>\n")


def _version() -> str:
    import fedaudit

    return getattr(fedaudit, "__version__", "?")


def write_report(run_dir: str | Path, output: str | Path | None = None) -> Path:
    """Render ``RUN_DIR/report.html`` (or ``output``) atomically; return its path.

    Raises :class:`ScenarioError` (one line naming the path) for a directory that is not a
    finished run.
    """
    from fedaudit.rundir import atomic_write_text

    run = load_run(run_dir)
    out = Path(output) if output is not None else run.path / REPORT_NAME
    atomic_write_text(out, render_html(run))
    return out
