"""The report's ROC figure shows the numbers of the attack table beside it.

No training: a fake finished run whose scores.npz is laid out like
:mod:`fedaudit.audit.stages.scores` writes it (one row per client and scored sample,
the clients' non-members drawn from one holdout, so holdout samples repeat across clients)
and whose results.json pooled metrics are :func:`fedaudit.metrics.membership_metrics` over
the distinct samples, as :func:`fedaudit.audit.attack_loop.attack` computes them.
"""

from __future__ import annotations

import html
import json
import re
from pathlib import Path

import numpy as np
import pytest

from fedaudit.metrics import membership_metrics, roc_points
from fedaudit.report.format import fmt, fmt_g

METHODS = {"loss": 0.35, "entropy": 0.2}  # method -> member score shift
KEYS = ("auc", "tpr_at_1pct_fpr", "tpr_at_0p1pct_fpr", "fpr_at_80pct_tpr",
        "min_fpr_resolution")


def write_scored_run(run_dir: Path, *, n_clients: int = 4, members: int = 60,
                     holdout: int = 150, seed: int = 3, pooled: bool = True) -> dict:
    """A finished run with scores.npz and results.json; returns the distinct samples."""
    rng = np.random.default_rng(seed)
    run_dir.mkdir(parents=True)
    member_ids = np.arange(n_clients * members).reshape(n_clients, members)
    hold_ids = 10_000 + np.arange(holdout)
    # every client drew the same `shared` holdout samples (a rare class, say), the rest at
    # random; the shared ones score high, so counting them once per client moves the AUC
    shared = hold_ids[:members // 2]
    sets = [(member_ids[c], np.r_[shared, rng.choice(hold_ids[len(shared):],
                                                     members - len(shared), replace=False)])
            for c in range(n_clients)]
    ids = np.unique(np.concatenate([np.r_[m, n] for m, n in sets]))
    is_member = ids < 10_000
    bump = 0.5 * np.isin(ids, shared)
    cols: dict[str, list] = {k: [] for k in ("target", "method", "sample_id", "client",
                                             "member", "score")}
    attacks, clients, distinct = {}, [{"client": c, "attacks": {}} for c in range(n_clients)], {}
    for target in ("global", "quantized:int4"):
        for method, shift in METHODS.items():
            score = rng.normal(size=len(ids)) + shift * is_member + bump  # one per sample
            pos = {int(i): k for k, i in enumerate(ids)}
            for c, (mem, non) in enumerate(sets):
                sid = np.r_[mem, non]
                lab = np.r_[np.ones(len(mem), np.int8), np.zeros(len(non), np.int8)]
                s = score[[pos[int(i)] for i in sid]]
                cols["target"].append(np.full(len(sid), target))
                cols["method"].append(np.full(len(sid), method))
                cols["sample_id"].append(sid)
                cols["client"].append(np.full(len(sid), c))
                cols["member"].append(lab)
                cols["score"].append(s)
                if target == "global":
                    m = membership_metrics(s, lab)
                    clients[c]["attacks"][method] = {k: m[k] for k in KEYS}
            if target == "global":
                m = membership_metrics(score, is_member.astype(np.int8))
                attacks[method] = {**{k: m[k] for k in KEYS}, "queries_per_sample": 1,
                                   "seconds_per_sample": 1e-4}
                distinct[method] = (score, is_member.astype(np.int8))
    np.savez(run_dir / "scores.npz",
             **{k: np.concatenate(v).astype(str if k in ("target", "method") else
                                            (np.float64 if k == "score" else np.int64))
                for k, v in cols.items()})
    res = {"scenario": {"scenario": {"name": "fake-scored"}, "attack": {"enabled": True}},
           "model": {"test_accuracy": 0.9, "test_loss": 0.3},
           "rounds": [{"round": 1, "test_accuracy": 0.9, "test_loss": 0.3}],
           "clients": clients}
    if pooled:
        res["attacks"] = attacks
    (run_dir / "results.json").write_text(json.dumps(res), encoding="utf-8")
    return {"distinct": distinct, "n_members": int(is_member.sum()),
            "n_nonmembers": int((~is_member).sum()), "n_rows": len(sets) * 2 * members}


def _render(run_dir: Path, monkeypatch) -> tuple[str, dict]:
    """The report's HTML and the matplotlib figures it embedded, by key."""
    from fedaudit.report import registry, render_html
    from fedaudit.rundir.reading import load_run

    figs, png = [], registry.png_base64

    def capture(fig):
        figs.append(fig)
        return png(fig)

    monkeypatch.setattr(registry, "png_base64", capture)
    text = render_html(load_run(run_dir))
    keys = re.findall(r'<figure id="fig-(\w+)"><img', text)
    assert len(keys) == len(figs)
    return text, dict(zip(keys, figs))


def _pooled_table(text: str) -> dict[str, list[str]]:
    """The cells of the "Pooled over clients" table, by attack label."""
    part = text.split("<h3>Pooled over clients (global model)</h3>", 1)[1]
    part = part.split("</table>", 1)[0]
    rows = re.findall(r"<tr>(.*?)</tr>", part.split("<tbody>", 1)[1])
    cells = [[html.unescape(c) for c in re.findall(r"<td[^>]*>(.*?)</td>", r)] for r in rows]
    return {r[0]: r[1:] for r in cells}


def _roc_note(text: str) -> str:
    m = re.search(r'<figure id="fig-roc">.*?<span class="note">(.*?)</span>', text, re.S)
    assert m, "the ROC figure has no note"
    return html.unescape(m.group(1))


def test_fake_run_discriminates_the_old_behaviour(tmp_path):
    """Guard: in this run, counting each per-client row (a holdout sample once per client
    that drew it) gives other numbers than the distinct samples."""
    info = write_scored_run(tmp_path / "run")
    assert info["n_members"] != info["n_nonmembers"]
    assert info["n_rows"] // 2 == info["n_members"]  # rows hold as many non-members
    sc = np.load(tmp_path / "run" / "scores.npz")
    for method in METHODS:
        sel = (sc["target"] == "global") & (sc["method"] == method)
        rows = membership_metrics(sc["score"][sel], sc["member"][sel])
        score, member = info["distinct"][method]
        ok = membership_metrics(score, member)
        assert fmt(rows["auc"]) != fmt(ok["auc"]), method
    assert fmt(rows["tpr_at_1pct_fpr"]) != fmt(ok["tpr_at_1pct_fpr"])


def test_roc_legend_and_note_match_the_attack_table(tmp_path, monkeypatch):
    from fedaudit.report.format import method_label

    info = write_scored_run(tmp_path / "run")
    text, figs = _render(tmp_path / "run", monkeypatch)
    assert 'class="error"' not in text
    table = _pooled_table(text)
    ax = figs["roc"].axes[0]
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    lines = {ln.get_label(): ln for ln in ax.get_lines()}
    for method in METHODS:
        # AUC [95% CI], AUC vs chance, TPR@1%FPR [95% CI], TPR@0.1%FPR, FPR@80%TPR, lowest
        auc, _, tpr1, *_, lowest = table[method_label(method)][:6]
        label = (f"{method_label(method)}  AUC {auc.split(' [')[0]}, "
                 f"TPR@1% {tpr1.split(' [')[0]}")
        assert label in legend, (label, legend)
        # the curve is fedaudit.metrics' ROC on the distinct samples, nothing else
        fpr, tpr = roc_points(*info["distinct"][method])
        keep = (fpr > 0) & (tpr > 0)
        np.testing.assert_array_equal(lines[label].get_xdata(), fpr[keep])
        np.testing.assert_array_equal(lines[label].get_ydata(), tpr[keep])
        assert lowest == fmt_g(1 / info["n_nonmembers"])
    note = _roc_note(text)
    n = info["n_nonmembers"]
    assert note.startswith(f"Lowest meaningful FPR here: 1/{n} = {fmt_g(1 / n)} "), note


def test_roc_legend_without_pooled_metrics_uses_fedaudit_metrics(tmp_path, monkeypatch):
    """An older results.json without ``attacks``: the legend is recomputed by
    fedaudit.metrics on the distinct samples, and the note still counts non-members."""
    from fedaudit.report.format import method_label

    info = write_scored_run(tmp_path / "run", pooled=False)
    text, figs = _render(tmp_path / "run", monkeypatch)
    legend = [t.get_text() for t in figs["roc"].axes[0].get_legend().get_texts()]
    for method in METHODS:
        m = membership_metrics(*info["distinct"][method])
        assert (f"{method_label(method)}  AUC {fmt(m['auc'])}, "
                f"TPR@1% {fmt(m['tpr_at_1pct_fpr'])}") in legend
    assert _roc_note(text).startswith(f"Lowest meaningful FPR here: 1/{info['n_nonmembers']} ")


@pytest.mark.parametrize("name, label", [("loss", "LOSS"), ("resmia", "Res-MIA"),
                                         ("mentropy", "m-entropy"), ("my-attack", "my-attack")])
def test_method_label_comes_from_the_attack_registry(name, label):
    from fedaudit.report.format import method_label

    assert method_label(name) == label
