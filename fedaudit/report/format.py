"""Numbers and small HTML pieces of the report: table cells, tick labels, label histograms."""

from __future__ import annotations

import math
from typing import Any

from attacks.membership.registry import attack_label, attack_order
from fedaudit.rundir.reading import num


def fmt(x: Any, digits: int = 3) -> str:
    """A number for a table cell: fixed digits, 'inf' as the infinity sign, None as a dash."""
    v = num(x)
    if v is None:
        return "–"
    if math.isnan(v):
        return "nan"
    if math.isinf(v):
        return "∞" if v > 0 else "−∞"
    return f"{v:.{digits}f}"


def fmt_ci(x: Any, ci: Any, digits: int = 3) -> str:
    """A number with its 95 % interval, ``0.612 [0.583, 0.641]`` (results.json ``*_ci``:
    ``[low, high]``); the number alone where there is no interval (an older run)."""
    if not (isinstance(ci, (list, tuple)) and len(ci) == 2):
        return fmt(x, digits)
    return f"{fmt(x, digits)} [{fmt(ci[0], digits)}, {fmt(ci[1], digits)}]"


#: the verdicts (:mod:`fedaudit.verdicts`) in a word, for narrow tables; the chance words of
#: runs made before issue 57 as they were
SHORT_VERDICTS = {"leaks": "leaks", "leaks (inverted score)": "flipped",
                  "no leak beyond delta": "no leak", "inconclusive": "inconcl",
                  "above chance": "above", "below chance": "below",
                  "not distinguishable from chance": "chance"}


def verdict_of(entry: dict, metric: str = "auc", *, short: bool = False) -> str:
    """The verdict results.json gives ``metric`` (``verdict``), or a dash; ``short``: in a
    word of at most 7 letters (leaks / flipped / no leak / inconcl)."""
    verdict = entry.get("verdict")
    text = str(verdict.get(metric, "–")) if isinstance(verdict, dict) else "–"
    return SHORT_VERDICTS.get(text, text) if short else text


def fmt_g(x: Any) -> str:
    v = num(x)
    if v is None:
        return "–"
    if math.isinf(v):
        return "∞" if v > 0 else "−∞"
    if 1e4 <= abs(v) < 1e9:
        return f"{v:,.0f}"
    return f"{v:.4g}"


def short(v: float) -> str:
    """A compact number for tick and cell labels: 1130 rather than 1.13e+03."""
    a = abs(v)
    if a == 0:
        return "0"
    if a >= 1e5 or a < 1e-3:
        return f"{v:.2g}"
    if a >= 100:
        return f"{v:.0f}"
    return f"{v:.3g}"


def sparkline(counts: list[Any], width: int = 64, height: int = 16) -> str:
    """A tiny inline-SVG bar chart of a label histogram (counts in its title)."""
    c = [int(num(v) or 0) for v in counts]
    if not c:
        return "–"
    top = max(c) or 1
    bw = width / len(c)
    bars = "".join(
        f'<rect x="{i * bw:.2f}" y="{height - max(1.0, v / top * height):.2f}" '
        f'width="{max(bw - 0.6, 0.6):.2f}" height="{max(1.0, v / top * height):.2f}"/>'
        for i, v in enumerate(c))
    text = " ".join(f"{i}:{v}" for i, v in enumerate(c))
    return (f'<svg class="spark" width="{width}" height="{height}" '
            f'viewBox="0 0 {width} {height}" role="img" aria-label="label histogram {text}">'
            f'<title>label histogram (class:count) {text}</title>{bars}</svg>')


def table(header: list[str], rows: list[list[str]], cls: str = "",
          text_cols: tuple[int, ...] = ()) -> str:
    """A plain HTML table; ``text_cols`` (indices, negative allowed) are left-aligned."""
    head = "".join(f"<th>{h}</th>" for h in header)
    n = len(header)
    left = {i % n for i in text_cols} if n else set()
    body = "".join("<tr>" + "".join(
        f'<td class="t">{c}</td>' if i in left else f"<td>{c}</td>"
        for i, c in enumerate(r)) + "</tr>" for r in rows)
    return f'<table class="{cls}"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'


def tpr_at_fpr(tpr: Any, resolution: Any, fpr: float, ci: Any = None) -> str:
    """A TPR@``fpr`` cell, with its interval ``ci`` when given.  Where 1/n non-members
    (``resolution``) exceeds ``fpr`` the only threshold with FPR <= ``fpr`` is the one with
    no false positive at all: the cell says so ("at FPR = 0", greyed) rather than show a
    number that looks precise."""
    res = num(resolution)
    if res is None or num(tpr) is None or res <= fpr:
        return fmt_ci(tpr, ci)
    return (f'<span class="lowres" title="1/n non-members = {res:.2g} &gt; {fpr:g}: no '
            f'threshold has 0 &lt; FPR &lt;= {fpr:g}, so this is the TPR at FPR = 0">'
            f'{fmt_ci(tpr, ci)} at FPR = 0</span>')


def leak_style(flag: str | None, v: float | None) -> str:
    """A red background where a figure leaks (:func:`fedaudit.verdicts.leak_flags`),
    deepening as the AUC leaves 0.5 (either way: an inverted score leaks too); nothing
    where no leak is shown, whatever the figure."""
    if flag is None or v is None or not math.isfinite(v):
        return ""
    a = min(1.0, abs(v - 0.5) / 0.25)
    return f' style="background:rgba(214,39,40,{0.15 + 0.45 * a:.2f})"'


def client_leaks(clients: list[dict]) -> dict[tuple[Any, str], str | None]:
    """Each (client, method) AUC's leak when every client and method of the table is looked
    at (Holm over them: :func:`fedaudit.verdicts.leak_flags`); empty for a run made before
    the tests (its entries carry no ``auc_test``)."""
    from fedaudit.metrics import MEMBERSHIP_RULE, estimate_of_entry
    from fedaudit.verdicts import leak_flags

    keys, ests = [], []
    for c in clients:
        for m, a in (c.get("attacks") or {}).items():
            keys.append((c.get("client"), m))
            ests.append(estimate_of_entry(a))
    if not any(e is not None for e in ests):
        return {}
    return dict(zip(keys, leak_flags(MEMBERSHIP_RULE, ests)))


def method_label(name: str) -> str:
    """The display name of an attack method: the ``label`` it was registered with
    (:func:`attacks.register_attack`), else the name itself (a run made with an attack
    this process does not know)."""
    return attack_label(name)


def ordered_methods(names: Any) -> list[str]:
    """Attack method names in the order the attacks declared at registration
    (:func:`attacks.membership.registry.attack_order`), unknown ones after, alphabetically."""
    names = list(dict.fromkeys(names))
    order = attack_order()
    return [m for m in order if m in names] + sorted(m for m in names if m not in order)
