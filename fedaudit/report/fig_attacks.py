"""Report section "Membership inference": per-client attack AUC and the pooled ROC curves.

The ROC figure shows exactly the pooled numbers of the attack table beside it: its curves
are :func:`fedaudit.metrics.roc_points` on the samples the pooled metrics of results.json
were computed on (each distinct scored sample once, :func:`fedaudit.rundir.reading.pooled_scores`),
and its legend prints results.json's AUC and TPR at 1% FPR (recomputed with
:func:`fedaudit.metrics.membership_metrics` on those samples only when results.json lacks
them).
"""

from __future__ import annotations

import math

import numpy as np

from fedaudit.metrics import membership_metrics, roc_points
from fedaudit.report.format import client_leaks, fmt, fmt_g, method_label, ordered_methods
from fedaudit.report.registry import Absent, figure, method_colors, new_figure, not_run
from fedaudit.rundir.layout import SCORES_NAME
from fedaudit.rundir.reading import RunData, num, pooled_scores


def _client_attacks(run: RunData) -> tuple[list[dict], list[str]]:
    clients = [c for c in run.results.get("clients") or [] if isinstance(c, dict)]
    methods = ordered_methods(m for c in clients for m in (c.get("attacks") or {}))
    if not clients or not methods:
        raise not_run(run, ("attack", "enabled"), what="per-client attack results")
    return clients, methods


@figure("client_auc", "attacks", "Attack AUC per client",
        "Each group is one client and each bar one attack, drawn from the chance level "
        "0.5 (dashed), with its 95 % interval (black); a bar is solid only where the client "
        "leaks under that attack, every client and attack looked at (Holm), and pale where "
        "no leak is shown: a small client's interval is wide, and a tall pale bar is "
        "inconclusive, not a leak.")
def fig_client_auc(run: RunData):
    clients, methods = _client_attacks(run)
    colors = method_colors(methods)
    leaks = client_leaks(clients)
    n, k = len(clients), len(methods)
    fig = new_figure(min(11.0, max(6.4, 3.0 + 0.55 * n * max(1, k) / 5)), 3.0)
    ax = fig.subplots()
    width = 0.8 / k
    x = np.arange(n)
    for i, m in enumerate(methods):
        entries = [(c.get("attacks") or {}).get(m, {}) for c in clients]
        auc = np.array([num(e.get("auc")) or math.nan for e in entries])
        ci = np.array([e["auc_ci"] if isinstance(e.get("auc_ci"), list) else [math.nan] * 2
                       for e in entries], dtype=float).reshape(n, 2)
        solid = np.array([leaks.get((c.get("client"), m)) is not None for c in clients])
        at = x - 0.4 + width * (i + 0.5)
        ax.bar(at, auc - 0.5, width, bottom=0.5, color=colors[m], label=method_label(m),
               alpha=0.3 if leaks else 0.85)
        if solid.any():
            ax.bar(at[solid], (auc - 0.5)[solid], width, bottom=0.5, color=colors[m])
        ax.errorbar(at, auc, yerr=np.abs(np.vstack([auc - ci[:, 0], ci[:, 1] - auc])),
                    fmt="none", ecolor="k", elinewidth=0.7, capsize=1.5)
    ax.axhline(0.5, color="k", ls="--", lw=1)
    ax.set_xticks(x)
    step = max(1, n // 25)
    ax.set_xticklabels([str(c.get("client", i)) if i % step == 0 else ""
                        for i, c in enumerate(clients)])
    ax.set_xlabel("client")
    ax.set_ylabel("AUC")
    ax.set_xlim(-0.6, n - 0.4)
    vals = [num(v) for c in clients for m in methods
            for v in [(c.get("attacks") or {}).get(m, {}).get("auc"),
                      *((c.get("attacks") or {}).get(m, {}).get("auc_ci") or [])]]
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
    scores = run.npz(SCORES_NAME)
    if scores is None:
        raise not_run(run, ("attack", "enabled"), what=SCORES_NAME)
    glob = scores["target"] == "global"
    if not glob.any():
        raise Absent("Not run in this scenario (the global model was not attacked; "
                     "attack.targets has no 'global').")
    methods = ordered_methods(np.unique(scores["method"][glob]).tolist())
    pooled = run.results.get("attacks") if isinstance(run.results.get("attacks"), dict) else {}
    colors = method_colors(methods)
    fig = new_figure(5.6, 4.4)
    ax = fig.subplots()
    lo, dropped, resolution = 1.0, 0, []
    curves: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    for m in methods:
        _, y, s = pooled_scores(scores, "global", m)
        ok = np.isfinite(s)
        dropped += int((~ok).sum())
        y, s = y[ok], s[ok]
        if len(np.unique(y)) < 2:
            continue
        fpr, tpr = roc_points(s, y)
        curves[m] = (fpr, tpr)
        n_neg, n_pos = int((y == 0).sum()), int((y == 1).sum())
        lo = min(lo, 1.0 / n_neg, 1.0 / n_pos)
        table = pooled.get(m) if isinstance(pooled.get(m), dict) else {}
        if num(table.get("auc")) is None or num(table.get("tpr_at_1pct_fpr")) is None:
            table = membership_metrics(s, y)  # an older or partial results.json
        res = num(table.get("min_fpr_resolution"))
        resolution.append(res if res is not None else 1.0 / n_neg)
        keep = (fpr > 0) & (tpr > 0)
        ax.plot(fpr[keep], tpr[keep], color=colors[m], lw=1.4,
                label=(f"{method_label(m)}  AUC {fmt(table.get('auc'))}, "
                       f"TPR@1% {fmt(table.get('tpr_at_1pct_fpr'))}"),
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
    res = min(resolution)  # 1 / distinct non-members, the table's "lowest FPR"
    note = (f"Lowest meaningful FPR here: 1/{round(1 / res)} = {fmt_g(res)} (one "
            "non-member); points with FPR or TPR exactly 0 are not drawn on log axes.")
    same = [(a, b) for i, a in enumerate(curves) for b in list(curves)[i + 1:]
            if curves[a][0].shape == curves[b][0].shape
            and np.array_equal(curves[a][0], curves[b][0])
            and np.array_equal(curves[a][1], curves[b][1])]
    if same:
        note += (" Identical curves (the attacks rank the samples the same way) hide each "
                 "other: " + ", ".join(f"{method_label(a)} = {method_label(b)}"
                                       for a, b in same) + ".")
    if dropped:
        note += f" {dropped} non-finite scores were left out."
    return fig, note
