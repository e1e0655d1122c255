"""Report section "Attacker positions": the curious server's view per client and round,
and the insider's view of the global model round by round (:mod:`fedaudit.audit.targets`)."""

from __future__ import annotations

import math

import numpy as np

from fedaudit.report.registry import Absent, figure, method_colors, new_figure, not_run
from fedaudit.report.format import method_label, ordered_methods
from fedaudit.rundir.reading import RunData, num


def _best_server_method(run: RunData) -> str | None:
    for row in run.results.get("attack_positions") or []:
        if row.get("position") == "curious server":
            return row.get("best_method")
    return None


@figure("server_view", "positions", "The curious server's view: AUC per client and round",
        "Each cell: the AUC of the server's best attack against that client's local model "
        "as the server received it in that round, on the client's own members against "
        "class-matched non-members (0.5 = chance; grey = not attacked). A row darker than "
        "the outsider's AUC on the final global model is a client the server learns more "
        "about than anyone who only sees the release.")
def fig_server_view(run: RunData):
    sv = run.results.get("server_view")
    if not isinstance(sv, dict) or not sv.get("clients"):
        raise not_run(run, ("attack", "enabled"), what="server-view attacks "
                      "(attack.targets has no 'clients')")
    method = _best_server_method(run)
    clients = sv["clients"]
    rounds = sorted({int(r) for c in clients for r in c.get("rounds", {})})
    if not method or not rounds:
        raise Absent("No client model was attacked (see the notes in results.json "
                     "server_view).")
    grid = np.full((len(clients), len(rounds)), np.nan)
    for i, c in enumerate(clients):
        for r, per in (c.get("rounds") or {}).items():
            auc = num((per.get(method) or {}).get("auc"))
            if auc is not None:
                grid[i, rounds.index(int(r))] = auc
    import matplotlib

    fig = new_figure(min(2.5 + 0.45 * len(rounds), 9.0), 1.2 + 0.32 * len(clients))
    ax = fig.subplots()
    im = ax.imshow(grid, aspect="auto", vmin=0.5, vmax=max(0.75, float(np.nanmax(grid))),
                   cmap=matplotlib.colormaps["Reds"].with_extremes(bad="0.85"))
    ax.set_xticks(range(len(rounds)), [str(r) for r in rounds])
    ax.set_yticks(range(len(clients)), [str(c.get("client")) for c in clients])
    ax.set_xlabel("round")
    ax.set_ylabel("client")
    fig.colorbar(im, ax=ax, label=f"{method_label(method)} AUC")
    return fig, f"Method: {method_label(method)} (the curious server's best by pooled AUC)."


@figure("round_attacks", "positions", "The global model round by round",
        "Pooled AUC of each single-model attack against the global model after each round "
        "(what every client sees); a curve that rises with the rounds is leakage that "
        "accumulates as the model fits its clients.")
def fig_round_attacks(run: RunData):
    rows = run.results.get("round_attacks")
    if not rows:
        raise not_run(run, ("attack", "enabled"), what="round-by-round attacks "
                      "(attack.targets has no 'rounds')")
    methods = ordered_methods(m for r in rows for m in r.get("attacks", {}))
    colors = method_colors(methods)
    fig = new_figure(6.0, 2.9)
    ax = fig.subplots()
    x = [int(r["round"]) for r in rows]
    for m in methods:
        y = [num((r["attacks"].get(m) or {}).get("auc")) for r in rows]
        ax.plot(x, [math.nan if v is None else v for v in y], "o-", color=colors[m],
                label=method_label(m))
    ax.axhline(0.5, color="0.6", lw=1, ls=":")
    ax.set_xlabel("round")
    ax.set_ylabel("AUC (pooled over clients)")
    ax.xaxis.get_major_locator().set_params(integer=True)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    note = "" if len(x) > 1 else "One round attacked: set attack.rounds = 'all' for the curve."
    return fig, note
