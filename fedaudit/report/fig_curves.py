"""Report section "Membership inference": the per-sample curves attacks declare
(:class:`attacks.membership.registry.AttackCurves`; Res-MIA's confidence decay), one figure per
registered attack that declares them, drawn from results.json ``<attack>_curves`` with the
title, guide and axes the attack gave."""

from __future__ import annotations

from functools import partial

import numpy as np

from attacks.membership.registry import ATTACKS, AttackCurves, attack_curves, attack_label
from fedaudit.report.registry import FIGURES, Absent, FigureSpec, figure, new_figure, not_run
from fedaudit.rundir.reading import RunData, num

#: attack name -> its figure, as registered by :func:`register_curve_figures`
_SPECS: dict[str, FigureSpec] = {}


def register_curve_figures() -> None:
    """One figure (key ``<attack>_curves``) per registered attack with curves; drops the
    figures of attacks no longer registered.  Run on import and before each report, so an
    attack registered later (a notebook's plug-in) gets its figure too."""
    for name, spec in list(_SPECS.items()):
        if name not in ATTACKS or attack_curves(name) is None:
            FIGURES.remove(spec)
            del _SPECS[name]
    for name in ATTACKS:
        curves = attack_curves(name)
        if curves is not None and name not in _SPECS:
            figure(f"{name}_curves", "attacks", curves.title, curves.guide)(
                partial(draw_curves, name, curves))
            _SPECS[name] = FIGURES[-1]


def draw_curves(name: str, spec: AttackCurves, run: RunData):
    """The mean curve of the members and of the non-members (left) and their gap
    (right)."""
    curves = run.results.get(f"{name}_curves")
    if not isinstance(curves, dict) or not curves.get("members") or not curves.get("nonmembers"):
        methods = run.flag("attack", "methods")
        if run.flag("attack", "enabled") is not False and isinstance(methods, list) \
                and name not in methods:
            raise Absent(f"Not run in this scenario (attack.methods has no '{name}').")
        raise not_run(run, ("attack", "enabled"), what=f"{attack_label(name)} curves")
    mem = np.array([num(v) for v in curves["members"]], dtype=float)
    non = np.array([num(v) for v in curves["nonmembers"]], dtype=float)
    k = min(len(mem), len(non))
    mem, non = mem[:k], non[:k]
    steps = np.arange(k)
    fig = new_figure(8.0, 2.9)
    ax1, ax2 = fig.subplots(1, 2)
    ax1.plot(steps, mem, "o-", color="C3", label="members")
    ax1.plot(steps, non, "s--", color="C0", label="non-members")
    ax1.set_ylabel(spec.ylabel)
    if spec.ylim is not None:
        ax1.set_ylim(*spec.ylim)
    ax1.legend(fontsize=8)
    ax2.bar(steps, mem - non, color=np.where(mem - non >= 0, "C3", "C0"), width=0.6)
    ax2.axhline(0, color="k", lw=0.8)
    ax2.set_ylabel("members - non-members")
    shape = (run.results.get("data") or {}).get("shape")
    options = run.scenario.get(f"attack.{name}")
    labels = spec.ticks(shape, options if isinstance(options, dict) else {}, k) \
        if spec.ticks is not None else None
    for ax in (ax1, ax2):
        ax.set_xticks(steps)
        ax.set_xticklabels(labels or [str(i) for i in range(k)], fontsize=8)
        ax.set_xlabel(spec.xlabel)
        ax.grid(alpha=0.3)
    return fig


register_curve_figures()
