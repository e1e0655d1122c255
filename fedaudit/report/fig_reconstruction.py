"""The reconstructions' figures (``reconstructions.npz``) in the report's section on the
attacks on updates (:mod:`fedaudit.report.fig_update_attacks`): the reconstructions beside
the true samples they were matched to, and the leakage per client and round."""

from __future__ import annotations

import numpy as np

from fedaudit.report.fig_update_attacks import SECTION
from fedaudit.report.format import fmt
from fedaudit.report.registry import Absent, figure, new_figure
from fedaudit.rundir.layout import RECONSTRUCTIONS_NAME, aggregate_file
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
    picks = picks[:8]
    fig = new_figure(1.4 * 3, 2.6 * len(picks))
    axes = fig.subplots(2 * len(picks), 3, squeeze=False)
    for p, (m, label, idx) in enumerate(picks):
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
                axes[2 * p, 0].set_ylabel(f"{m}\n{label}: true")
                axes[2 * p + 1, 0].set_ylabel("rebuilt")
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


@figure("reconstruction_leakage", SECTION, "Leakage per client and round",
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
