"""The labs' checks (fedaudit.labs.checks): a TODO fails with the TODO message, right
answers pass the toy cases, the toys separate each mistake from the answer, a failed
check (in a notebook too) renders as its message alone."""

from __future__ import annotations

import math

import numpy as np
import pytest

from fedaudit.labs import LabCheckError, todo
from fedaudit.labs.checks.challenge import null_auc_sd

from tests.helpers.labs import error_cell, execute_notebook
from tests.labs.mistakes import (
    gnq_toy,
    greedy_with,
    loss_results,
    p_label,
    px_bits,
    rank_exposure,
    roc_with,
    secrets_toy,
    server_results,
    spearman_toy,
    toy_leaderboard_line,
    toy_roc,
)


# ---- checks ----------------------------------------------------------------------------------

def test_a_todo_fails_its_check_with_the_todo_message():
    from fedaudit.labs.checks import loss_attack

    def unfinished(proba, y):
        return todo("loss_scores: log of the probability of the true label")

    with pytest.raises(LabCheckError, match=r"Task 2\.1 is not done yet: the cell above "
                                            r"still has a TODO \(loss_scores"):
        loss_attack.loss_scores(unfinished)
    with pytest.raises(LabCheckError, match="not done yet"):
        loss_attack.matches_fedaudit(todo("auc"), loss_results(), 0.0)


def test_loss_check_accepts_the_right_score_and_explains_wrong_ones():
    from fedaudit.labs.checks import loss_attack

    loss_attack.loss_scores(lambda p, y: np.log(np.maximum(p[np.arange(len(y)), y], 1e-30)))
    loss_attack.loss_scores(lambda p, y: np.log(np.clip(p, 1e-12, 1.0))[np.arange(len(y)), y])
    with pytest.raises(LabCheckError, match="higher for members"):
        loss_attack.loss_scores(lambda p, y: -np.log(p[np.arange(len(y)), y]))
    with pytest.raises(LabCheckError, match="confidence attack"):
        loss_attack.loss_scores(lambda p, y: p[np.arange(len(y)), y])
    with pytest.raises(LabCheckError, match="raised ZeroDivisionError"):
        loss_attack.loss_scores(lambda p, y: 1 / 0)


def test_roc_check_catches_a_reversed_orientation():
    from sklearn.metrics import roc_auc_score

    from fedaudit.labs.checks import loss_attack

    rng = np.random.default_rng(0)
    member = rng.integers(0, 2, 300)
    scores = member + rng.normal(0, 1, 300)
    with pytest.raises(LabCheckError, match="higher means member"):
        loss_attack.roc_summary(lambda s, m: (roc_auc_score(m, -s), 0.0), scores, member)
    with pytest.raises(LabCheckError, match="AUC is 0.41: is your score oriented"):
        loss_attack.matches_fedaudit(0.41, loss_results(0.59), 0.0)


def test_the_right_answers_pass_the_toy_cases(capsys):
    from fedaudit.labs.checks import challenge, gnq, loss_attack, server

    loss_attack.loss_scores(lambda p, y: np.log(np.maximum(p_label(p, y), 1e-30)))
    loss_attack.roc_summary(roc_with(lambda f, t: t[f <= 0.01].max()), *toy_roc())
    loss_attack.matches_fedaudit(0.6, loss_results(), 0.0)
    sv = server_results()
    server.server_auc(0.70, sv, client=1)
    server.gains(np.array([0.63 - 0.57, 0.70 - 0.59]), sv)
    server.fedmia_vs_loss({"loss": (0.66, 0.02), "fedmia": (0.64, 0.10)}, sv)
    gnq.top_k_hits(2, gnq_toy(), client=0, k=2)
    challenge.beats_chance(toy_leaderboard_line(0.57, 0.05))
    _lab9_right_answers()
    out = capsys.readouterr().out.splitlines()
    assert len(out) == 16 and all(line.startswith("ok  Task ") for line in out), out


def _lab9_right_answers():
    """Lab 9's right answers on the toy table and the toy run (8 checks)."""
    from fedaudit.labs.checks import secrets as sc

    t = secrets_toy()
    sc.log_perplexity(lambda f, p, s: px_bits(f, p, s), t.lm)
    sc.exposure(rank_exposure(lambda s, a: int((a <= s).sum())))
    sc.exposures(t.expo, t.px, t.lm, t.results)
    sc.by_repeats({int(k): float(t.expo[t.sec.repeats == k].mean()) for k in (0, 1, 16)},
                  t.expo, t.lm, t.results)
    sc.server_view({int(k): float(t.expo0[t.mine & (t.sec.repeats == k)].mean())
                    for k in (0, 1, 16)}, t.expo0, t.px0, t.lm0, t.results)
    greedy = greedy_with(lambda lp, a: int(a[np.argmax(lp[a])]))
    sc.greedy(greedy)
    sc.extraction({v: m.decode(greedy(m.next_log_probs, t.sec.prefix, t.sec.alphabet, 2))
                   for v, m in (("global", t.lm), (0, t.lm0))},
                  {"global": t.lm, 0: t.lm0}, t.results)
    sc.gnq_vs_exposure(spearman_toy(t), t.results)


def test_lab9_toy_cases_separate_the_mistakes_from_the_answer():
    """Each listed mistake of tasks 9.1, 9.2 and 9.4 gives, on the toy table or the toy
    candidates, a value of its own (else the check could not name it)."""
    from fedaudit.labs.checks import secrets as sc

    m = sc.toy_model()
    for secret in ((3, 1, 2, 2), (1, 1, 3)):
        values = [sc._px_rule(m, sc.TOY_PREFIX, secret, r) for r in ("right", *sc._PX_MISTAKES)]
        assert min(abs(a - b) for i, a in enumerate(values) for b in values[i + 1:]) > 0.1
        # the right rule is Px by hand
        assert values[0] == pytest.approx(px_bits(m, sc.TOY_PREFIX, secret), abs=1e-12)
    # the first toy secret (Px 2, tied with two candidates: rank 4 of 8, 1 bit) separates
    # every exposure mistake whose message differs
    s = sc._TOY_SECRETS[0]
    assert sc._toy_exposure("right", s) == 1.0
    by_message = {}
    for rule, message in sc._EXPOSURE_MISTAKES.items():
        by_message.setdefault(message, set()).add(sc._toy_exposure(rule, s))
    flat = [v for vs in by_message.values() for v in vs]
    assert len(flat) == len(set(flat)) and 1.0 not in flat
    outs = [tuple(sc._greedy_rule(m, sc.TOY_PREFIX, sc.TOY_ALPHABET, 4, r))
            for r in ("right", *sc._GREEDY_MISTAKES)]
    assert len(set(outs)) == len(outs)
    assert outs[0] == tuple(sc.beam_decode(m, sc.TOY_PREFIX, sc.TOY_ALPHABET, 4)[0][0])


def test_toy_cases_separate_the_mistakes_from_the_answer():
    """The ROC toys of task 2.2 are what make interpolation, a strict < and the off-by-one
    index fail: their answers are hand-computed here from the blocks that build them."""
    from fedaudit.labs.checks.loss_attack import _EXACT, _TIED, _mistakes
    from fedaudit.metrics import membership_metrics

    # _TIED: 20 members on top (TPR 0.10 at FPR 0), 1 non-member (FPR 0.005), then a tie of
    # 3 non-members and 30 members: one diagonal step to (0.02, 0.25)
    assert membership_metrics(*_TIED)["tpr_at_1pct_fpr"] == 0.10
    m = _mistakes(*_TIED)
    assert m["interpolation"] == pytest.approx(0.15, abs=1e-12)  # halfway... a third: .1+.05
    assert m["first point beyond"] == 0.25
    # _EXACT: 20 members, 1 non-member, 10 members, 1 non-member (FPR = 2/200 = 0.01
    # exactly), 10 members: TPR 0.20 at FPR 0.01, 0.15 below it
    assert membership_metrics(*_EXACT)["tpr_at_1pct_fpr"] == 0.20
    assert _mistakes(*_EXACT)["strict"] == 0.15


def test_a_failed_check_renders_as_its_message_alone():
    from fedaudit.labs.checks import loss_attack

    with pytest.raises(LabCheckError) as err:
        loss_attack.loss_scores(lambda p, y: p_label(p, y))
    assert err.value._render_traceback_() == [f"LabCheckError: {err.value}"]


def test_dp_bound_check():
    from fedaudit.labs.checks import defenses

    defenses.dp_bound(lambda e, d, f: 1.0 if math.isinf(e) else min(1.0, math.exp(e) * f + d))
    with pytest.raises(LabCheckError, match="never exceed 1"):
        defenses.dp_bound(lambda e, d, f: math.exp(e) * f + d if not math.isinf(e) else 1.0)


def test_null_auc_sd_matches_the_exact_small_case():
    # one member, one non-member: under the null the AUC is 0 or 1 with probability 1/2
    assert null_auc_sd(1, 1) == pytest.approx(0.5, rel=1e-15)
    # two and two: the 4!/(2!2!) = 6 orderings give U = 0,1,2,2,3,4: var(U) = 10/6,
    # var(AUC) = var(U) / 16 = 5/48
    assert null_auc_sd(2, 2) == pytest.approx(math.sqrt(5 / 48), rel=1e-15)


@pytest.mark.labs
def test_a_wrong_answer_in_a_notebook_shows_the_message_alone(tmp_path):
    """A check that fails on a wrong answer (not a TODO) prints its one-line message as the
    cell's error, without a traceback into fedaudit.labs.checks."""
    import nbformat

    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(
        "import numpy as np\nfrom fedaudit.labs.checks import loss_attack as check\n"
        "check.loss_scores(lambda proba, y: proba[np.arange(len(y)), y])")]
    path = tmp_path / "wrong.ipynb"
    nbformat.write(nb, path)
    nb, error = execute_notebook(path, tmp_path)
    assert error is not None
    _, out = error_cell(nb)
    assert out["ename"] == "LabCheckError"
    assert out["evalue"].startswith("Task 2.1: you return p_y (the confidence attack)")
    assert out["traceback"] == [f"LabCheckError: {out['evalue']}"], out["traceback"]


def test_todo_is_found_inside_containers():
    from fedaudit.labs import is_todo, require

    assert is_todo({"a": (1.0, todo("gap"))})
    assert not is_todo({"a": (1.0, 2.0)})
    with pytest.raises(LabCheckError, match=r"Task 3\.3 is not done yet.*\(gap\)"):
        require({"a": (1.0, todo("gap"))}, "3.3")
