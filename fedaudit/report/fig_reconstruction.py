"""The reconstructions' figures (``reconstructions.npz``) in the report's section on the
attacks on updates (:mod:`fedaudit.report.fig_update_attacks`): the reconstructions beside
the true samples they were matched to, and the leakage per client and round."""

from __future__ import annotations

import numpy as np

from fedaudit.report.fig_update_attacks import SECTION
from fedaudit.report.format import fmt
from fedaudit.report.registry import Absent, figure, new_figure
from fedaudit.rundir.layout import IMPRINT_NAME, RECONSTRUCTIONS_NAME, aggregate_file
from fedaudit.rundir.reading import RunData


def _rows(run: RunData) -> dict[str, np.ndarray]:
    rows = run.npz(RECONSTRUCTIONS_NAME)
    if rows is None:
        raise Absent("Not run in this scenario (reconstruction.enabled = false, or no "
                     "reconstruction method listed).")
    return rows


def _pictures(rows: dict[str, np.ndarray], by: str):
    """The best, median and worst PSNR per attack and ``by`` (``client``: each client's
    first attacked round; ``round``: each attacked round's aggregate), rebuilt under true."""
    picks = []  # (method, label, [(row index) best, median, worst])
    for m in sorted(set(rows["method"].tolist())):
        for g in sorted(set(rows[by][rows["method"] == m].tolist())):
            sel = np.flatnonzero((rows["method"] == m) & (rows[by] == g))
            sel = sel[rows["round"][sel] == rows["round"][sel].min()]
            order = sel[np.argsort(-rows["psnr"][sel], kind="stable")]
            # best, median, worst; a client of fewer samples shows each once
            picks.append((m, f"{by} {g}", list(dict.fromkeys(
                [order[0], order[len(order) // 2], order[-1]]))))
    picks = picks[:9]
    one_method = len({m for m, _, _ in picks}) == 1  # then the title names it, not each group
    wide = max(len(idx) for _, _, idx in picks)  # 1 when every client held one sample
    across = min(9 // wide, len(picks))  # groups side by side: the page's width, not a strip
    down = -(-len(picks) // across)
    gap = 0.45  # a narrow empty column between groups holds the next group's row labels
    fig = new_figure(1.4 * (wide * across + gap * (across - 1)), 2.6 * down + 0.3 * one_method)
    axes = fig.subplots(2 * down, (wide + 1) * across - 1, squeeze=False,
                        gridspec_kw={"width_ratios": (([1] * wide + [gap]) * across)[:-1]})
    if one_method:
        fig.suptitle(picks[0][0])
    for ax in axes.flat:
        ax.axis("off")
    for p, (m, label, idx) in enumerate(picks):
        top, left = 2 * (p // across), (wide + 1) * (p % across)
        for j, i in enumerate(idx):
            for k, img in enumerate((rows["true_image"][i], rows["image"][i])):
                ax = axes[top + k, left + j]
                ax.axis("on")
                a = np.asarray(img, dtype=np.float64)
                ax.imshow(a[0] if a.shape[0] == 1 else np.transpose(a, (1, 2, 0)),
                          cmap="gray" if a.shape[0] == 1 else None, vmin=0.0, vmax=1.0)
                ax.set_xticks([])
                ax.set_yticks([])
                if k:
                    ax.set_xlabel(f"{fmt(rows['psnr'][i], 1)} dB")
            if j == 0:
                axes[top, left].set_ylabel(f"{label}: true" if one_method
                                           else f"{m}\n{label}: true")
                axes[top + 1, left].set_ylabel("rebuilt")
    return fig


@figure("reconstruction_pictures", SECTION, "Reconstructions beside the originals",
        "Per attack and client (its first attacked round): the reconstructions with the best, "
        "the median and the worst PSNR (each once: fewer for a client of 1 or 2 samples; bottom "
        "row of each pair) under the true sample each "
        "was matched to (top), with the PSNR in dB. The true samples are the audit's ground "
        "truth; the attack never saw them.")
def fig_pictures(run: RunData):
    return _pictures(_rows(run), "client")


@figure("aggregate_reconstruction_pictures", SECTION,
        "Reconstructions from the rounds' aggregates beside the originals",
        "Per attack and attacked round, its aggregate inverted as one batch of the round's "
        "samples (what the server under secure aggregation and every client see): the "
        "reconstructions with the best, the median and the worst PSNR (bottom) under the "
        "true sample of the round each was matched to (top).")
def fig_aggregate_pictures(run: RunData):
    rows = run.npz(aggregate_file(RECONSTRUCTIONS_NAME))
    if rows is None:
        raise Absent("Not run in this scenario (reconstruction.on does not list "
                     "'aggregate', or no round's aggregate had at most "
                     "reconstruction.max_samples samples).")
    return _pictures(rows, "round")


@figure("imprint_pictures", SECTION, "What the malicious server read back",
        "The imprint block's read-back (one candidate image per bin whose bias changed, "
        "matched to the round's samples): the candidates with the best, the median and the "
        "worst PSNR (bottom) under the sample each was matched to (top); results.json "
        "malicious_server counts the near-exact ones.")
def fig_imprint_pictures(run: RunData):
    rows = run.npz(IMPRINT_NAME)
    if rows is None:
        raise Absent("Not run in this scenario (imprint.enabled = false, or no bin of the "
                     "block changed).")
    if "true_image" not in rows:
        raise Absent("imprint.npz was written before it kept the matched true images: rerun "
                     "the scenario to draw them.")
    n = len(rows["psnr"])
    return _pictures({**rows, "method": np.full(n, "imprint"), "client": np.full(n, -1)},
                     "round")


@figure("reconstruction_leakage", SECTION, "Leakage per client and round",
        "Mean SSIM of each client's reconstructions with its true samples, per attacked "
        "round (first attack listed), written in each cell of a small grid; blank: not "
        "attacked. Darker is more of the client's data rebuilt.")
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
    if grid.size <= 400:  # small enough to read: each cell's value written in it
        for (i, j), v in np.ndenumerate(grid):
            if np.isfinite(v):
                ax.text(j, i, f"{v:.2f}", ha="center", va="center", fontsize=7,
                        color="white" if v > 0.5 else "black")
    ax.set_title(m)
    fig.colorbar(im, ax=ax, label="mean SSIM")
    return fig
