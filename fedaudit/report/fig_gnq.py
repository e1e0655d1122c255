"""Report section "Gradient uniqueness (GNQ)": update GNQ per client and round, and the
per-sample GNQ distribution with the canaries."""

from __future__ import annotations

import numpy as np

from fedaudit.report.format import short
from fedaudit.report.registry import Absent, figure, new_figure, not_run, plain_log_ticks
from fedaudit.rundir.layout import GNQ_SAMPLES_NAME
from fedaudit.rundir.reading import RunData, num


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
    fig = new_figure(min(10.0, 3.2 + 0.55 * n_rounds), min(9.0, 1.3 + 0.28 * n_c))
    ax = fig.subplots()
    im = ax.imshow(np.ma.masked_invalid(m), aspect="auto", cmap=cmap, norm=norm,
                   interpolation="nearest")
    cbar = fig.colorbar(im, ax=ax, label="update GNQ", shrink=0.9)
    if isinstance(norm, LogNorm):
        plain_log_ticks(cbar.ax.yaxis)
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
    g = run.npz(GNQ_SAMPLES_NAME)
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
    fig = new_figure(6.4, 2.9)
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
