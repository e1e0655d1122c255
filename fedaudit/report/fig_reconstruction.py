"""Report section "What the server rebuilds" (results.json ``label_leakage``,
``reconstruction``; ``reconstructions.npz``): the label-leakage and reconstruction attacks
on the clients' updates (:mod:`fedaudit.audit.stages.reconstruction`) -- the tables, the
reconstructions beside the true samples they were matched to, and the leakage per client
and round."""

from __future__ import annotations

import html
from typing import Any

import numpy as np

from fedaudit.report.format import fmt, table
from fedaudit.report.registry import Absent, figure, new_figure
from fedaudit.report.sections import register_section
from fedaudit.rundir.layout import RECONSTRUCTIONS_NAME
from fedaudit.rundir.reading import RunData


def _pct(v: Any) -> str:
    return "–" if v is None else f"{100 * v:.0f}%"


def _pct_ci(v: Any, ci: Any) -> str:
    """A share with its 95 % interval (results.json ``[low, high]``), when there is one."""
    if not (isinstance(ci, list) and len(ci) == 2):
        return _pct(v)
    return f"{_pct(v)} [{_pct(ci[0])}, {_pct(ci[1])}]"


def _sd(v: Any, sd: Any, digits: int) -> str:
    """A mean ± its spread (results.json ``*_sd``), when there is one."""
    return fmt(v, digits) if sd is None else f"{fmt(v, digits)} ± {fmt(sd, digits)}"


def section_reconstruction(run: RunData) -> str:
    labels = run.results.get("label_leakage")
    rec = run.results.get("reconstruction")
    if not labels and not rec:
        return ""
    tm = (rec or labels)["threat_model"]
    out = [f"<p>Threat model: an {html.escape(tm['position'])} that knows "
           f"{html.escape('; '.join(tm['knows']))}, and not "
           f"{html.escape('; '.join(tm['does_not_know']))}.</p>"]
    if labels:
        rows = [[html.escape(m), str(p["cases"]), _pct(p["label_accuracy"]),
                 _pct_ci(p.get("labels_recovered", 0) / p["labels"] if p.get("labels") else None,
                         p.get("label_accuracy_ci")),
                 fmt(p["count_error"], 2)] for m, p in labels["pooled"].items()]
        out.append(table(["label attack", "updates", "label accuracy (multiset)",
                          "labels recovered [95% CI]", "mean count error"], rows,
                         text_cols=(0,)))
    if rec:
        b = rec["budget"]
        out.append(f"<p>Reconstruction: labels from {html.escape(rec['labels_from'])}; "
                   f"{b['iterations']} iterations x {b['restarts']} restart(s); SSIM window "
                   f"{rec.get('ssim_window')}; prior: {html.escape(rec['prior'])}; "
                   f"{fmt(rec['seconds'], 1)} s.</p>")
        rows = [[html.escape(m), str(p.get("samples", 0)),
                 _sd(p.get("psnr"), p.get("psnr_sd"), 1), str(p.get("exact", 0)),
                 _sd(p.get("ssim"), p.get("ssim_sd"), 3), fmt(p.get("prior_ssim"), 3),
                 _pct(p.get("identifiability")), _pct(p.get("label_accuracy"))]
                for m, p in rec["pooled"].items()]
        out.append(table(["attack", "samples", "PSNR (dB, inexact; mean ± sd)", "exact",
                          "SSIM (mean ± sd)", "prior's SSIM", "identifiable", "labels right"],
                         rows, text_cols=(0,)))
        out += [f"<p class=\"intro\">{html.escape(n)}</p>" for n in rec.get("notes", [])]
    return "".join(out)


def _rows(run: RunData) -> dict[str, np.ndarray]:
    rows = run.npz(RECONSTRUCTIONS_NAME)
    if rows is None:
        raise Absent("Not run in this scenario (reconstruction.enabled = false, or no "
                     "reconstruction method listed).")
    return rows


@figure("reconstruction_pictures", "reconstruction", "Reconstructions beside the originals",
        "Per attack and client (its first attacked round): the reconstructions with the best, "
        "the median and the worst PSNR (each once: fewer for a client of 1 or 2 samples; bottom "
        "row of each pair) under the true sample each "
        "was matched to (top), with the PSNR in dB. The true samples are the audit's ground "
        "truth; the attack never saw them.")
def fig_pictures(run: RunData):
    rows = _rows(run)
    picks = []  # (method, client, [(row index) best, median, worst])
    for m in sorted(set(rows["method"].tolist())):
        for c in sorted(set(rows["client"][rows["method"] == m].tolist())):
            sel = np.flatnonzero((rows["method"] == m) & (rows["client"] == c))
            sel = sel[rows["round"][sel] == rows["round"][sel].min()]
            order = sel[np.argsort(-rows["psnr"][sel], kind="stable")]
            # best, median, worst; a client of fewer samples shows each once
            picks.append((m, c, list(dict.fromkeys(
                [order[0], order[len(order) // 2], order[-1]]))))
    picks = picks[:8]
    fig = new_figure(1.4 * 3, 2.6 * len(picks))
    axes = fig.subplots(2 * len(picks), 3, squeeze=False)
    for p, (m, c, idx) in enumerate(picks):
        for j in range(len(idx), 3):  # the unused columns of a client of 1 or 2 samples
            axes[2 * p, j].axis("off")
            axes[2 * p + 1, j].axis("off")
        for j, i in enumerate(idx):
            for k, img in enumerate((rows["true_image"][i], rows["image"][i])):
                ax = axes[2 * p + k, j]
                a = np.asarray(img, dtype=np.float64)
                ax.imshow(a[0] if a.shape[0] == 1 else np.transpose(a, (1, 2, 0)),
                          cmap="gray" if a.shape[0] == 1 else None, vmin=0.0, vmax=1.0)
                ax.set_xticks([])
                ax.set_yticks([])
                if k:
                    ax.set_xlabel(f"{fmt(rows['psnr'][i], 1)} dB")
            if j == 0:
                axes[2 * p, 0].set_ylabel(f"{m}\nclient {c}: true")
                axes[2 * p + 1, 0].set_ylabel("rebuilt")
    return fig


@figure("reconstruction_leakage", "reconstruction", "Leakage per client and round",
        "Mean SSIM of each client's reconstructions with its true samples, per attacked "
        "round (first attack listed); blank: not attacked. Darker is more of the client's "
        "data rebuilt.")
def fig_leakage(run: RunData):
    rows = _rows(run)
    m = sorted(set(rows["method"].tolist()))[0]
    sel = rows["method"] == m
    clients = sorted(set(rows["client"][sel].tolist()))
    rounds = sorted(set(rows["round"][sel].tolist()))
    grid = np.full((len(clients), len(rounds)), np.nan)
    for i, c in enumerate(clients):
        for j, r in enumerate(rounds):
            here = sel & (rows["client"] == c) & (rows["round"] == r)
            if here.any():
                grid[i, j] = rows["ssim"][here].mean()
    fig = new_figure(1.2 + 0.5 * len(rounds), 1.0 + 0.3 * len(clients))
    ax = fig.add_subplot()
    im = ax.imshow(grid, cmap="viridis_r", vmin=0.0, vmax=1.0, aspect="auto")
    ax.set_xticks(range(len(rounds)), [str(r) for r in rounds])
    ax.set_yticks(range(len(clients)), [str(c) for c in clients])
    ax.set_xlabel("round")
    ax.set_ylabel("client")
    ax.set_title(m)
    fig.colorbar(im, ax=ax, label="mean SSIM")
    return fig


register_section("reconstruction", "What the server rebuilds",
                 "The server's attacks on each client's update (issue 39): which labels "
                 "the client trained on, and its training images rebuilt by matching the "
                 "update, against the client's true samples of the round.",
                 html=section_reconstruction)
