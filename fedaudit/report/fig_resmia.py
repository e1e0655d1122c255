"""Report section "Membership inference": Res-MIA's confidence decay."""

from __future__ import annotations

import math

import numpy as np

from fedaudit.report.registry import Absent, figure, new_figure, not_run
from fedaudit.rundir.reading import RunData, num


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
    fig = new_figure(8.0, 2.9)
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
