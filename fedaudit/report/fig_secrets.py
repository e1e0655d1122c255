"""Report section "Planted secrets" (results.json ``secrets``, ``secrets_summary``): the
exposure of every secret by repeats against the never-inserted references, extraction, and
GNQ against exposure (:mod:`fedaudit.audit.stages.secrets`)."""

from __future__ import annotations

import html

import numpy as np

from fedaudit.report.format import fmt, table
from fedaudit.report.registry import Absent, figure, new_figure
from fedaudit.report.sections import register_section
from fedaudit.rundir.reading import RunData, num


def _by_repeats(entry: dict) -> str:
    means = entry.get("mean_exposure") or {}
    return "; ".join(f"{'references' if k == '0' else f'x{k}'}: {fmt(v, 2)}"
                     for k, v in sorted(means.items(), key=lambda kv: int(kv[0])))


def section_secrets(run: RunData) -> str:
    secrets = run.results.get("secrets")
    summary = run.results.get("secrets_summary") or {}
    if not secrets:
        return ""
    head = (f"<p>{len(secrets)} secrets of {html.escape(str(summary.get('secret_length')))} "
            f"characters from {html.escape(repr(summary.get('alphabet')))} after the template "
            f"{html.escape(repr(summary.get('template')))}: {summary.get('candidates')} "
            f"candidates, exposure at most {fmt(summary.get('max_exposure'), 2)} bits "
            f"({html.escape(str(summary.get('method')))}); extraction: beam "
            f"{summary.get('beam')}.</p>")
    views = [["global model (pooled)", _by_repeats(summary.get("global") or {}),
              str((summary.get("global") or {}).get("extracted", "–"))]]
    views += [[f"client {c['client']} as the server saw it (round {c['round']})",
               _by_repeats(c), str(c.get("extracted", "–"))]
              for c in summary.get("clients") or []]
    rows = [[html.escape(s["secret"]), "–" if s["client"] is None else str(s["client"]),
             str(s["repeats"]), fmt(s["exposure"], 2), "yes" if s["extracted"] else "no",
             fmt((s.get("server_view") or {}).get("exposure"), 2),
             fmt(s.get("gnq_percentile"), 1)]
            for s in sorted(secrets, key=lambda s: (-s["repeats"], -1 if s["client"] is None else s["client"]))]
    link = summary.get("gnq_vs_exposure")
    tail = ("" if not link else
            f"<p>GNQ percentile vs exposure (global model), planted secrets: Spearman "
            f"{fmt(link['spearman'], 2)} (p = {fmt(link['pvalue'], 3)}, n = {link['n']}); "
            f"mean GNQ percentile {fmt(link['mean_gnq_percentile'], 1)}.</p>")
    notes = "".join(f"<p class=\"intro\">{html.escape(n)}</p>" for n in summary.get("notes", []))
    return (head + table(["view", "mean exposure by repeats (bits)", "extracted"], views,
                         text_cols=(0, 1))
            + table(["secret", "client", "repeats", "exposure (global)", "extracted",
                     "exposure (server view)", "GNQ percentile"], rows, text_cols=(0,))
            + tail + notes)


@figure("secrets_exposure", "secrets", "Exposure by repeats",
        "Each point: one secret's exposure (bits) on the global model against how many times "
        "it was inserted (0 = never-inserted references, the baseline of a model that saw "
        "nothing); the dashed line is the most a secret can have (rank 1 of all candidates). "
        "Memorisation shows as exposure rising with the repeats.")
def fig_secrets_exposure(run: RunData):
    secrets = run.results.get("secrets")
    if not secrets:
        raise Absent("Not run in this scenario (no [canaries] kind = 'secret').")
    reps = np.array([s["repeats"] for s in secrets], dtype=float)
    expo = np.array([num(s["exposure"]) for s in secrets], dtype=float)
    levels = sorted(set(reps.tolist()))
    fig = new_figure(4.6, 2.8)
    ax = fig.subplots()
    pos = np.array([levels.index(r) for r in reps], dtype=float)
    jitter = (np.arange(len(pos)) % 5 - 2) * 0.04
    ax.scatter(pos + jitter, expo, s=14, color="tab:red", alpha=0.8)
    top = num((run.results.get("secrets_summary") or {}).get("max_exposure"))
    if top is not None:
        ax.axhline(top, color="0.5", ls="--", lw=0.8)
    ax.set_xticks(range(len(levels)), ["refs" if r == 0 else f"x{int(r)}" for r in levels])
    ax.set_xlabel("times inserted")
    ax.set_ylabel("exposure (bits)")
    return fig


register_section("secrets", "Planted secrets", "Secret-sharer canaries (Carlini et al. "
                 "2019): how far each planted secret ranks above the candidates a model "
                 "never saw, whether decoding from the template recovers it, and how its "
                 "gradient uniqueness in its client compares.", html=section_secrets)
