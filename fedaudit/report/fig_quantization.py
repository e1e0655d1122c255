"""Report section "Post-training quantization and r_Qn": r_Qn, accuracy and attack AUC
per quantizer."""

from __future__ import annotations

import math

import numpy as np

from fedaudit.report.registry import figure, method_colors, new_figure, not_run, plain_log_ticks
from fedaudit.report.format import method_label, ordered_methods
from fedaudit.rundir.reading import RunData, num


def _rqn_entries(run: RunData) -> list[dict]:
    q = [e for e in run.results.get("quantization") or [] if isinstance(e, dict)]
    if not q:
        raise not_run(run, ("audit.quantization", "enabled"), what="quantization results")
    return q


@figure("quantization", "quantization", "Post-training quantization: r_Qn, accuracy and "
        "attack AUC per quantizer",
        "Read the three panels column by column: a quantizer is a good release when its "
        "r_Qn (top, larger = more secure) is high, its test accuracy (middle) stays close "
        "to fp32 and the attacks' AUC on it (bottom) stays near 0.5.")
def fig_quantization(run: RunData):
    entries = _rqn_entries(run)
    names = [str(e.get("quantizer")) for e in entries]
    x = np.arange(len(entries))
    rq = [num(e.get("rqn")) for e in entries]
    fig = new_figure(min(10.0, max(6.4, 3.0 + 0.75 * len(entries))), 6.4)
    ax1, ax2, ax3 = fig.subplots(3, 1, sharex=True)
    finite = [v for v in rq if v is not None and math.isfinite(v)]
    log_axis = bool(finite) and min(finite) > 0
    if log_axis:
        ax1.set_yscale("log")
        top = max(finite) * 3.0
        bottom = min(finite) / 2.0
    else:
        top = (max(finite) * 1.3 if finite and max(finite) > 0 else 1.0)
        bottom = 0.0
    inf_idx = [i for i, v in enumerate(rq) if v is not None and math.isinf(v) and v > 0]
    fin_idx = [i for i, v in enumerate(rq) if v is not None and math.isfinite(v)]
    ax1.plot(x[fin_idx], [rq[i] for i in fin_idx], "o", color="C2", ms=7, label="r_Qn")
    if inf_idx:
        ax1.plot(x[inf_idx], [top] * len(inf_idx), "^", color="C2", ms=9, mfc="white",
                 mew=2, clip_on=False, label="r_Qn = inf (drawn at the top)")
        for i in inf_idx:
            ax1.annotate("inf", (x[i], top), textcoords="offset points", xytext=(0, -14),
                         ha="center", fontsize=8, color="C2")
    ax1.set_ylim(bottom, top)
    if log_axis:
        plain_log_ticks(ax1.yaxis)
    ax1.set_ylabel("r_Qn")
    ax1.grid(alpha=0.3)
    if inf_idx:
        ax1.legend(fontsize=7.5, loc="lower left")
    acc = [num(e.get("test_accuracy")) for e in entries]
    ax2.bar(x, [a if a is not None else math.nan for a in acc], color="C0", width=0.6)
    ref = next((a for e, a in zip(entries, acc) if e.get("quantizer") == "fp32"), None)
    if ref is None:
        ref = num((run.results.get("model") or {}).get("test_accuracy"))
    if ref is not None:
        ax2.axhline(ref, color="k", ls=":", lw=1)
        ax2.set_title(f"dotted line: unquantized model ({ref:.3f})", loc="right",
                      fontsize=7.5, color="0.3", pad=2)
    ax2.set_ylim(0, 1.02)
    ax2.set_ylabel("test accuracy")
    ax2.grid(axis="y", alpha=0.3)
    methods = ordered_methods(m for e in entries for m in (e.get("attacks") or {}))
    colors = method_colors(methods)
    for m in methods:
        auc = [num((e.get("attacks") or {}).get(m, {}).get("auc")) for e in entries]
        ax3.plot(x, [a if a is not None else math.nan for a in auc], "o-", color=colors[m],
                 label=method_label(m), ms=4)
    ax3.axhline(0.5, color="k", ls="--", lw=1)
    if not methods:
        ax3.text(0.5, 0.5, "quantized releases were not attacked in this scenario",
                 transform=ax3.transAxes, ha="center", va="center", fontsize=9, color="0.4")
    else:
        fig.legend(*ax3.get_legend_handles_labels(), fontsize=7.5,
                   ncols=min(len(methods), 5), loc="outside lower center", frameon=False)
    ax3.set_ylabel("attack AUC")
    ax3.grid(alpha=0.3)
    ax3.set_xticks(x)
    ax3.set_xticklabels(names, rotation=25, ha="right", fontsize=8)
    note = ""
    if inf_idx:
        note = ("r_Qn = inf (fewer than two distinct quantized candidates or no variance "
                "in the loss differences) for: " + ", ".join(names[i] for i in inf_idx)
                + "; drawn as open triangles at the top of the panel.")
    return fig, note
