"""Report section "Training": the global model's accuracy and loss per round."""

from __future__ import annotations

import math

from fedaudit.report.registry import Absent, figure, new_figure
from fedaudit.rundir.reading import RunData, num


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

    fig = new_figure(8.0, 2.9)
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
