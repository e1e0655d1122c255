"""The classroom labs (labs/, fedaudit.labs): notebooks built from their sources, checks
that pass on right answers and fail on wrong or unfinished ones, the challenge's grading,
and -- under the ``labs`` marker -- every notebook executed with nbclient."""

from __future__ import annotations

import csv
import importlib.util
import json
import math
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from fedaudit.labs import LabCheckError, todo
from fedaudit.labs.challenge import SubmissionError, grade, write_submission
from fedaudit.labs.checks.challenge import null_auc_sd

ROOT = Path(__file__).resolve().parent.parent
LABS = ROOT / "labs"
FEDAUDIT = [sys.executable, "-m", "fedaudit.cli"]


def _build_module():
    spec = importlib.util.spec_from_file_location("labs_build", LABS / "build.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # its dataclasses look their module up there
    spec.loader.exec_module(mod)
    return mod


# ---- the single source ---------------------------------------------------------------------

def test_committed_notebooks_equal_their_build():
    build = _build_module()
    assert build.sources(), "no lab sources found"
    assert build.main(["--check"]) == 0, "run: python labs/build.py"


def test_build_splits_solution_and_stub(tmp_path):
    build = _build_module()
    src = tmp_path / "lab9_demo.py"
    src.write_text("# %% [markdown]\n# # Title\n#\n# text\n# %%\ndef f(x):\n"
                   "    ### BEGIN SOLUTION\n    return x + 1\n    ### STUB\n"
                   "    return todo('f')\n    ### END SOLUTION\n# %% check\ncheck(f)\n"
                   "# %% [markdown] answer\n# the answer\n")
    student, solution = build.build(src)
    assert [c.cell_type for c in student.cells] == ["markdown", "code", "code"]
    assert [c.cell_type for c in solution.cells] == ["markdown", "code", "code", "markdown"]
    assert student.cells[0].source == "# Title\n\ntext"
    assert solution.cells[1].source == "def f(x):\n    return x + 1"
    assert student.cells[1].source == "def f(x):\n    return todo('f')"
    assert student.cells[1].metadata["tags"] == ["todo"]
    assert solution.cells[1].metadata["tags"] == ["solution"]
    assert student.cells[2].metadata["tags"] == ["check"]
    assert "###" not in student.cells[1].source + solution.cells[1].source
    # ids derive from the position: two builds are identical
    assert build.render(build.build(src)[0]) == build.render(student)


@pytest.mark.parametrize("body, message", [
    ("    ### BEGIN SOLUTION\n    x = 1\n", "not closed"),
    ("    ### STUB\n", "outside a solution block"),
    ("    ### BEGIN SOLUTION\n    ### END SOLUTION\n", "without ### STUB"),
])
def test_build_rejects_broken_markers(tmp_path, body, message):
    build = _build_module()
    src = tmp_path / "lab9_bad.py"
    src.write_text("# %%\ndef f():\n" + body)
    with pytest.raises(SystemExit, match=message):
        build.build(src)


def test_every_lab_has_todos_checks_and_reflection():
    build = _build_module()
    for src in build.sources():
        student, solution = build.build(src)
        tags = [c.metadata.get("tags", []) for c in student.cells]
        assert any("todo" in t for t in tags), src.name
        assert any("check" in t for t in tags), src.name
        # the first TODO comes before the first check (the shipped notebook fails there)
        first_todo = next(i for i, t in enumerate(tags) if "todo" in t)
        first_check = next(i for i, t in enumerate(tags) if "check" in t)
        assert first_todo < first_check, src.name
        assert any("Reflection" in c.source for c in student.cells
                   if c.cell_type == "markdown"), src.name
        assert not any("todo(" in c.source for c in solution.cells if c.cell_type == "code"), \
            f"{src.name}: a solution cell still calls todo()"
        # notebooks use the Python API, never the shell
        code = "\n".join(c.source for c in solution.cells if c.cell_type == "code")
        assert "subprocess" not in code and "\n!" not in "\n" + code, src.name


# ---- checks ----------------------------------------------------------------------------------

def test_a_todo_fails_its_check_with_the_todo_message():
    from fedaudit.labs.checks import loss_attack

    def unfinished(proba, y):
        return todo("loss_scores: log of the probability of the true label")

    with pytest.raises(LabCheckError, match=r"Task 2\.1 is not done yet: the cell above "
                                            r"still has a TODO \(loss_scores"):
        loss_attack.loss_scores(unfinished)
    with pytest.raises(LabCheckError, match="not done yet"):
        loss_attack.matches_fedaudit(todo("auc"), _loss_results(), 0.0)


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
        loss_attack.matches_fedaudit(0.41, _loss_results(0.59), 0.0)


# ---- each mistake a task warns about, fed to its check ----------------------------------------
#
# One row per mistake: the check, what the student got wrong, the student's code (or value),
# and a pattern the failure must match (it names the concept).  experiments/lab_check_messages.py
# prints these rows' messages as the table of docs/validation.md section 11.

_AR4 = np.arange(4)


def _py(p, y):
    return p[np.arange(len(y)), y]


def _roc_with(tpr_rule):
    from sklearn.metrics import roc_auc_score, roc_curve

    def roc_summary(s, m):
        fpr, tpr, _ = roc_curve(m, s, drop_intermediate=False)
        return float(roc_auc_score(m, s)), float(tpr_rule(fpr, tpr))
    return roc_summary


def _toy_roc():
    rng = np.random.default_rng(0)
    member = rng.integers(0, 2, 400)
    return member + rng.normal(0, 1.0, 400), member


def _loss_results(auc=0.6, tpr=0.0, members=250, nonmembers=200):
    return {"attacks": {"loss": {"auc": auc, "tpr_at_1pct_fpr": tpr,
                                 "min_fpr_resolution": 1.0 / nonmembers}},
            "clients": [{"attack_set": {"members": members}}]}


def _server_results():
    """Two clients, three attacked rounds; client 1's LOSS AUC rises round by round."""
    def rounds(aucs):
        return {str(r): {"loss": {"auc": a}} for r, a in enumerate(aucs, start=1)}
    return {
        "server_view": {"clients": [{"client": 0, "rounds": rounds([0.52, 0.58, 0.63])},
                                    {"client": 1, "rounds": rounds([0.55, 0.62, 0.70])}],
                        "pooled": {"loss": {"auc": 0.66, "tpr_at_1pct_fpr": 0.02},
                                   "fedmia": {"auc": 0.64, "tpr_at_1pct_fpr": 0.10}}},
        "clients": [{"attacks": {"loss": {"auc": 0.57}}, "attack_set": {"members": 50}},
                    {"attacks": {"loss": {"auc": 0.59}}, "attack_set": {"members": 50}}],
    }


def _gnq_toy():
    """Client 0: ten samples, scored twice; the two canaries (ids 3 and 7) have the highest
    mean GNQ, sample 9 the lowest."""
    ids = np.tile(np.arange(10), 2)
    score = np.r_[np.arange(10.0), np.arange(10.0)] / 10
    score[ids == 3] += 5
    score[ids == 7] += 4
    return {"sample_id": ids, "score": score, "client": np.zeros(20, int),
            "canary": np.isin(ids, [3, 7])}


def _strict_fpr_at_80(scores, member):
    from sklearn.metrics import roc_curve

    fpr, tpr, _ = roc_curve(member, scores, drop_intermediate=False)
    return float(fpr[tpr > 0.8].min())


def _grade(auc, tpr):
    from fedaudit.labs.leaderboard import LeaderboardLine, chance, null_auc_sd

    return LeaderboardLine("s", auc, tpr, 0.0, 1000, 2500, 0.0, 1.0, chance(1000, 2500),
                           null_auc_sd(1000, 2500))


def _secrets_toy():
    """Lab 9's toy run: the checks' toy table as two language models (the global one and
    client 0's), 9 candidates (alphabet of 3 tokens, length 2), two secrets in each of
    clients 0 and 1 (repeats 1 and 16) and three references, with results.json entries
    computed from them (the global and client 0's candidates' Px are hand-picked)."""
    from types import SimpleNamespace

    from fedaudit.data.secrets import PlantedSecrets
    from fedaudit.labs.checks import secrets as sc
    from fedaudit.labs.runs import LanguageModel
    from fedaudit.secrets import beam_decode, exposure

    alphabet = np.array(sc.TOY_ALPHABET)
    # candidate index = the two alphabet positions in base 3
    tokens = alphabet[np.array([[0, 0], [2, 1], [1, 1], [0, 2], [1, 0], [2, 2], [0, 1]])]
    code = np.array([0, 7, 4, 2, 3, 8, 1])
    sec = PlantedSecrets(np.array(sc.TOY_PREFIX), alphabet, tokens,
                         np.array([0, 0, 1, 1, -1, -1, -1]), np.array([1, 16, 1, 16, 0, 0, 0]),
                         tuple(np.arange(k) for k in (1, 16, 1, 16, 0, 0, 0)))
    vocab = tuple("abcdefg")
    glob = LanguageModel(sc.toy_model(9), vocab, sec, "global model")
    c0 = LanguageModel(sc.toy_model(10), vocab, sec, "client 0's model")
    px = np.array([5.0, 1.0, 3.0, 4.0, 2.5, 6.0, 7.0, 2.0, 8.0])
    px0 = np.array([6.0, 4.0, 3.0, 5.0, 2.0, 7.0, 8.0, 0.5, 9.0])
    e, e0 = exposure(px[code], px), exposure(px0[code], px0)
    mine = np.array([1, 1, 0, 0, 1, 1, 1], bool)
    # what greedy decoding extracts from each toy model (fedaudit's beam of 1)
    found = {name: tuple(beam_decode(m.next_log_probs, sec.prefix, alphabet, 2)[0][0])
             for name, m in (("global", glob), (0, c0))}
    hit = {name: [tuple(row) == f for row in tokens] for name, f in found.items()}
    results = {
        "secrets": [{"secret": sec.text(i, vocab),
                     "client": None if sec.client[i] < 0 else int(sec.client[i]),
                     "repeats": int(sec.repeats[i]), "exposure": float(e[i]),
                     "extracted": bool(hit["global"][i] and sec.client[i] >= 0),
                     "gnq_percentile": [80.0, 20.0, 60.0, 40.0][i]
                     if i < 4 else None,
                     "server_view": {"exposure": float(e0[i]), "extracted": hit[0][i]}
                     if i < 2 else None} for i in range(7)],
        "secrets_summary": {
            "global": {"mean_exposure": {str(k): float(e[sec.repeats == k].mean())
                                         for k in (0, 1, 16)}},
            "clients": [{"client": 0, "mean_exposure": {
                str(k): float(e0[mine & (sec.repeats == k)].mean()) for k in (0, 1, 16)}}]},
    }
    return SimpleNamespace(lm=glob, lm0=c0, px=px, px0=px0, expo=e, expo0=e0, mine=mine,
                           results=results, sec=sec, found=found)


def _px_bits(model, prefix, secret, ln=False, context=None):
    """Px of the toy table by hand (bits), or in nats, or with another context rule."""
    seq, nats = list(prefix), 0.0
    for i, tok in enumerate(secret):
        ctx = context(list(prefix), list(secret), i) if context else seq
        nats -= model(np.array([ctx]))[0, tok]
        seq = seq + [tok]
    return nats if ln else nats / math.log(2)


def _rank_exposure(rank_of):
    def exposure(secret_px, all_px):
        r = rank_of(secret_px, np.asarray(all_px))
        return math.log2(len(all_px)) - math.log2(r) if r > 0 else math.inf
    return exposure


def _greedy_with(step):
    """A greedy decoder whose token choice is ``step(logp, alphabet)``."""
    def greedy(f, prefix, alphabet, length):
        context, out = list(prefix), []
        for _ in range(length):
            tok = step(f(np.array([context]))[0], np.asarray(alphabet))
            out.append(tok)
            context.append(tok)
        return np.array(out)
    return greedy


def _mistakes():
    from fedaudit.labs.checks import challenge, gnq, loss_attack, server
    from fedaudit.labs.checks import secrets as sc

    toy_s, toy_m = _toy_roc()
    # 8 members on top (TPR 0.8 at FPR 0), a non-member, 2 members, 10 non-members
    exact80 = (np.r_[np.arange(10.0, 2.0, -1), 2.5, 2.0, 1.5, -np.arange(1.0, 11.0)],
               np.r_[np.ones(8, int), 0, 1, 1, np.zeros(10, int)])
    sv = _server_results()
    g = _gnq_toy()
    loss_rows = {"target": np.array(["global"] * 6), "method": np.array(["loss"] * 6),
                 "member": np.ones(6, int), "sample_id": np.arange(6),
                 "score": np.array([1.0, 2.0, 3.0, 5.0, 4.0, 6.0])}
    gnq6 = {"sample_id": np.arange(6), "score": np.array([1.0, 2.0, 3.0, 4.0, 5.0, 6.0])}
    return [
        ("2.1", "returns the loss, not -loss",
         lambda: loss_attack.loss_scores(lambda p, y: -np.log(np.maximum(_py(p, y), 1e-30))),
         "higher for members"),
        ("2.1", "returns p_y (the confidence)",
         lambda: loss_attack.loss_scores(lambda p, y: _py(p, y)), "confidence attack"),
        ("2.1", "log of the largest probability, not of the true label's",
         lambda: loss_attack.loss_scores(lambda p, y: np.log(np.maximum(p.max(axis=1), 1e-30))),
         "TRUE label"),
        ("2.1", "no log guard (p_y = 0 gives log 0)",
         lambda: loss_attack.loss_scores(lambda p, y: np.log(_py(p, y))), "guard the log"),
        ("2.2", "interpolates: np.interp(0.01, fpr, tpr)",
         lambda: loss_attack.roc_summary(_roc_with(lambda f, t: np.interp(0.01, f, t)),
                                         toy_s, toy_m), "interpolat"),
        ("2.2", "strict fpr < 0.01",
         lambda: loss_attack.roc_summary(_roc_with(lambda f, t: t[f < 0.01].max()),
                                         toy_s, toy_m), r"fpr <= 0\.01, not fpr < 0\.01"),
        ("2.2", "off by one: tpr[np.searchsorted(fpr, 0.01)]",
         lambda: loss_attack.roc_summary(_roc_with(lambda f, t: t[np.searchsorted(f, 0.01)]),
                                         toy_s, toy_m), "off-by-one"),
        ("2.2", "reversed score",
         lambda: loss_attack.roc_summary(lambda s, m: _roc_with(
             lambda f, t: t[f <= 0.01].max())(-s, m), toy_s, toy_m), "higher means member"),
        ("2.3", "AUC of a reversed score",
         lambda: loss_attack.matches_fedaudit(0.41, _loss_results(0.59)),
         "higher means member"),
        ("2.3", "my_tpr wrong (0.05 where fedaudit has 0.0)",
         lambda: loss_attack.matches_fedaudit(0.6, _loss_results(), 0.05),
         "TPR at 1% FPR is too high"),
        ("2.4", "strict tpr > 0.8",
         lambda: loss_attack.false_accusations(_strict_fpr_at_80(*exact80) * 10_000,
                                               *exact80, 10_000), r"tpr >= 0\.8, not tpr > 0\.8"),
        ("2.4", "a wrong count", lambda: loss_attack.false_accusations(
            1234.0, exact80[0], exact80[1], 10_000), "too high|too low"),
        ("5.2", "top-k of the LOWEST mean GNQ (ascending sort)",
         lambda: gnq.top_k_hits(0, g, client=0, k=2), "DESCENDING"),
        ("5.3", "Spearman with one column negated",
         # Spearman of [1..6] with [1,2,3,5,4,6]: 1 - 6 * 2 / (6 * 35) = 198 / 210
         lambda: gnq.gnq_vs_attack(-198 / 210, gnq6, loss_rows), "sign is reversed"),
        ("7.1", "reversed score on the client's model",
         lambda: server.server_auc(0.30, sv, client=1), "higher means member"),
        ("7.1", "the global model instead of the client's",
         lambda: server.server_auc(0.59, sv, client=1), "GLOBAL model"),
        ("7.1", "the client's model of the first round",
         lambda: server.server_auc(0.55, sv, client=1), "round 1"),
        ("7.2", "the first round's entry of results.json",
         lambda: server.gains(np.array([0.52 - 0.57, 0.55 - 0.59]), sv), "round 1's entry"),
        ("7.3", "FedMIA of one round, not averaged over the rounds",
         lambda: server.fedmia_vs_loss({"loss": (0.66, 0.02), "fedmia": (0.60, 0.06)}, sv),
         "ALL the rounds"),
        ("8.2", "reversed score", lambda: challenge.beats_chance(_grade(0.43, 0.0)),
         "higher means member"),
        ("8.2", "AUC within noise of chance",
         lambda: challenge.beats_chance(_grade(0.52, 0.012)), "standard deviations above"),
        ("9.1", "natural log instead of log2",
         lambda: sc.log_perplexity(lambda f, p, s: _px_bits(f, p, s, ln=True)), "in nats"),
        ("9.1", "log-likelihood, not minus it",
         lambda: sc.log_perplexity(lambda f, p, s: -_px_bits(f, p, s)), "MINUS the sum"),
        ("9.1", "prefix forgotten (contexts start from the secret alone)",
         lambda: sc.log_perplexity(lambda f, p, s: _px_bits(
             f, p, s, context=lambda pre, sec, i: sec[:i])), "left out the prefix"),
        ("9.1", "the context holds the token it predicts",
         lambda: sc.log_perplexity(lambda f, p, s: _px_bits(
             f, p, s, context=lambda pre, sec, i: pre + sec[:i + 1])), "holds token i itself"),
        ("9.1", "mean over the tokens, not the sum",
         lambda: sc.log_perplexity(lambda f, p, s: _px_bits(f, p, s) / len(s)), "SUMS"),
        ("9.1", "a 1-D context passed to next_log_probs",
         lambda: sc.log_perplexity(lambda f, p, s: float(-f(np.asarray(p))[0, s[0]])),
         "2-D integer array"),
        ("9.2", "ties counted in the secret's favour (rank = #(<) + 1)",
         lambda: sc.exposure(_rank_exposure(lambda s, a: int((a < s).sum()) + 1)),
         "ties are counted in the secret's favour"),
        ("9.2", "rank from 0 (rank = #(<))",
         lambda: sc.exposure(_rank_exposure(lambda s, a: int((a < s).sum()))), "off by one"),
        ("9.2", "the secret not counted (rank = #(<=) - 1)",
         lambda: sc.exposure(_rank_exposure(lambda s, a: int((a <= s).sum()) - 1)),
         "off by one"),
        ("9.2", "reversed rank (#(>=))",
         lambda: sc.exposure(_rank_exposure(lambda s, a: int((a >= s).sum()))), "reversed"),
        ("9.2", "natural log instead of log2",
         lambda: sc.exposure(lambda s, a: math.log(len(a)) - math.log(int((a <= s).sum()))),
         "in nats"),
        ("9.2", "log2 |R| left out",
         lambda: sc.exposure(lambda s, a: -math.log2(int((a <= s).sum()))), "left out log2 |R|"),
        ("9.2", "exposures of another model's candidates",
         lambda: (lambda t: sc.exposures(t.expo0, t.px, t.lm, t.results))(_secrets_toy()),
         "fedaudit.secrets.exposure of the same"),
        ("9.3", "the references left out",
         lambda: (lambda t: sc.by_repeats({1: 0.0, 16: 0.0}, t.expo, t.lm, t.results))(
             _secrets_toy()), "references are repeats 0"),
        ("9.3", "median instead of mean",
         lambda: (lambda t: sc.by_repeats(
             {int(k): float(np.median(t.expo[t.sec.repeats == k])) for k in (0, 1, 16)},
             t.expo, t.lm, t.results))(_secrets_toy()), "median"),
        ("9.3", "server view: every client's secrets on client 0's model",
         lambda: (lambda t: sc.server_view(
             {int(k): float(t.expo0[t.sec.repeats == k].mean()) for k in (0, 1, 16)},
             t.expo0, t.px0, t.lm0, t.results))(_secrets_toy()), "ITS OWN secrets"),
        ("9.3", "server view: the global model's exposures",
         lambda: (lambda t: sc.server_view(
             {int(k): float(t.expo[t.mine & (t.sec.repeats == k)].mean()) for k in (0, 1, 16)},
             t.expo0, t.px0, t.lm0, t.results))(_secrets_toy()), "GLOBAL model's numbers"),
        ("9.4", "argmax over the whole vocabulary",
         lambda: sc.greedy(_greedy_with(lambda lp, a: int(np.argmax(lp)))), "outside the alphabet"),
        ("9.4", "the least likely token",
         lambda: sc.greedy(_greedy_with(lambda lp, a: int(a[np.argmin(lp[a])]))), "MOST likely"),
        ("9.4", "decoded tokens not fed back",
         lambda: sc.greedy(lambda f, p, a, n: np.array(
             [int(a[np.argmax(f(np.array([list(p)]))[0][a])])] * n)), "decoded so far"),
        ("9.4", "positions in the alphabet returned",
         lambda: sc.greedy(lambda f, p, a, n: np.searchsorted(
             np.asarray(a), _greedy_with(lambda lp, al: int(al[np.argmax(lp[al])]))(f, p, a, n))),
         "positions in the alphabet"),
        ("9.4", "decoded on another view's model",
         lambda: (lambda t: sc.extraction(
             {"global": t.lm.decode(_greedy_with(lambda lp, a: int(a[np.argmax(lp[a])]))(
                 t.lm0.next_log_probs, t.sec.prefix, t.sec.alphabet, 2))},
             {"global": t.lm}, t.results))(_secrets_toy()), "differs from greedy decoding"),
        ("9.4", "Spearman with one column negated",
         # GNQ 80, 20, 60, 40 against the toy's exposures: computed by the check
         lambda: (lambda t: sc.gnq_vs_exposure(-_spearman_toy(t), t.results))(_secrets_toy()),
         "sign is reversed"),
    ]


def _spearman_toy(t):
    from scipy.stats import spearmanr

    return float(spearmanr([80.0, 20.0, 60.0, 40.0], t.expo[:4]).statistic)


MISTAKES = _mistakes()


@pytest.mark.parametrize("task, mistake, feed, pattern", MISTAKES,
                         ids=[f"{m[0]}: {m[1]}" for m in MISTAKES])
def test_each_listed_mistake_fails_with_a_message_naming_it(task, mistake, feed, pattern):
    with pytest.raises(LabCheckError, match=f"^Task {re.escape(task)}: ") as err:
        feed()
    assert re.search(pattern, str(err.value)), str(err.value)


def test_the_right_answers_pass_the_toy_cases(capsys):
    from fedaudit.labs.checks import challenge, gnq, loss_attack, server

    loss_attack.loss_scores(lambda p, y: np.log(np.maximum(_py(p, y), 1e-30)))
    loss_attack.roc_summary(_roc_with(lambda f, t: t[f <= 0.01].max()), *_toy_roc())
    loss_attack.matches_fedaudit(0.6, _loss_results(), 0.0)
    sv = _server_results()
    server.server_auc(0.70, sv, client=1)
    server.gains(np.array([0.63 - 0.57, 0.70 - 0.59]), sv)
    server.fedmia_vs_loss({"loss": (0.66, 0.02), "fedmia": (0.64, 0.10)}, sv)
    gnq.top_k_hits(2, _gnq_toy(), client=0, k=2)
    challenge.beats_chance(_grade(0.57, 0.05))
    _lab9_right_answers()
    out = capsys.readouterr().out.splitlines()
    assert len(out) == 16 and all(line.startswith("ok  Task ") for line in out), out


def _lab9_right_answers():
    """Lab 9's right answers on the toy table and the toy run (8 checks)."""
    from fedaudit.labs.checks import secrets as sc

    t = _secrets_toy()
    sc.log_perplexity(lambda f, p, s: _px_bits(f, p, s), t.lm)
    sc.exposure(_rank_exposure(lambda s, a: int((a <= s).sum())))
    sc.exposures(t.expo, t.px, t.lm, t.results)
    sc.by_repeats({int(k): float(t.expo[t.sec.repeats == k].mean()) for k in (0, 1, 16)},
                  t.expo, t.lm, t.results)
    sc.server_view({int(k): float(t.expo0[t.mine & (t.sec.repeats == k)].mean())
                    for k in (0, 1, 16)}, t.expo0, t.px0, t.lm0, t.results)
    greedy = _greedy_with(lambda lp, a: int(a[np.argmax(lp[a])]))
    sc.greedy(greedy)
    sc.extraction({v: m.decode(greedy(m.next_log_probs, t.sec.prefix, t.sec.alphabet, 2))
                   for v, m in (("global", t.lm), (0, t.lm0))},
                  {"global": t.lm, 0: t.lm0}, t.results)
    sc.gnq_vs_exposure(_spearman_toy(t), t.results)


def test_lab9_toy_cases_separate_the_mistakes_from_the_answer():
    """Each listed mistake of tasks 9.1, 9.2 and 9.4 gives, on the toy table or the toy
    candidates, a value of its own (else the check could not name it)."""
    from fedaudit.labs.checks import secrets as sc

    m = sc.toy_model()
    for secret in ((3, 1, 2, 2), (1, 1, 3)):
        values = [sc._px_rule(m, sc.TOY_PREFIX, secret, r) for r in ("right", *sc._PX_MISTAKES)]
        assert min(abs(a - b) for i, a in enumerate(values) for b in values[i + 1:]) > 0.1
        # the right rule is Px by hand
        assert values[0] == pytest.approx(_px_bits(m, sc.TOY_PREFIX, secret), abs=1e-12)
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


@pytest.mark.parametrize("task, mistake, feed, pattern", MISTAKES,
                         ids=[f"{m[0]}: {m[1]}" for m in MISTAKES])
def test_no_failure_states_the_expected_value(task, mistake, feed, pattern):
    """A failure names a direction or a concept, never the number to copy (for the fake
    results above: fedaudit's AUCs, TPRs and counts)."""
    with pytest.raises(LabCheckError) as err:
        feed()
    text = str(err.value)
    for answer in ("0.5900", "0.7000", "0.6600", "0.6400", "0.0200", "0.1000", "expected"):
        assert answer not in text, text


def test_a_failed_check_renders_as_its_message_alone():
    from fedaudit.labs.checks import loss_attack

    with pytest.raises(LabCheckError) as err:
        loss_attack.loss_scores(lambda p, y: _py(p, y))
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


# ---- grading ---------------------------------------------------------------------------------

def _key(path: Path, member: np.ndarray) -> Path:
    with open(path, "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["id", "member", "sample_id", "client"])
        for i, m in enumerate(member):
            w.writerow([i, int(m), 1000 + i, 0 if m else -1])
    return path


@pytest.fixture()
def key(tmp_path):
    member = np.r_[np.ones(300, int), np.zeros(300, int)]
    np.random.default_rng(1).shuffle(member)
    return _key(tmp_path / "key.csv", member), member


def test_grading_the_truth_gives_tpr_one(key, tmp_path):
    path, member = key
    g = grade(write_submission(tmp_path / "truth.csv", np.arange(len(member)), member), path)
    assert g.tpr_at_1pct_fpr == 1.0 and g.auc == 1.0
    assert (g.n_members, g.n_nonmembers) == (300, 300)
    # AUC's null sd sqrt(601 / (12 * 300 * 300)) = 0.02359, p95 0.5 + 1.6449 sd = 0.53881;
    # Clopper-Pearson with 300 of 300: low = 0.025 ** (1 / 300) = 0.98778; chance p95 of
    # NHG(600, 300, 4) = 9 / 300
    assert g.csv_line() == ("truth,1.0000,1.0000,1.0000,300,300,0.5388,yes,0.9878,1.0000,"
                            "0.0300,yes")


def test_grading_random_scores_gives_auc_near_one_half(key, tmp_path):
    path, member = key
    rng = np.random.default_rng(2)
    g = grade(write_submission(tmp_path / "random.csv", np.arange(len(member)),
                               rng.random(len(member))), path)
    # scores independent of membership: AUC ~ N(1/2, sd^2) with sd from Mann-Whitney's null
    # variance (0.0167 here); 4 sd is exceeded with probability 6e-5 for any seed
    assert abs(g.auc - 0.5) <= 4 * null_auc_sd(300, 300)


def test_grading_reads_ids_in_any_order(key, tmp_path):
    path, member = key
    order = np.random.default_rng(3).permutation(len(member))
    g = grade(write_submission(tmp_path / "shuffled.csv", order, member[order]), path)
    assert g.auc == 1.0


def _cli(*args, cwd=None):
    env = dict(os.environ, FLWR_TELEMETRY_ENABLED="0")
    return subprocess.run([*FEDAUDIT, *args], capture_output=True, text=True, cwd=cwd,
                          env=env, timeout=600)


def test_cli_grade_prints_a_leaderboard_line(key, tmp_path):
    path, member = key
    sub = write_submission(tmp_path / "alice.csv", np.arange(len(member)), member)
    out = _cli("lab", "grade", str(sub), "--key", str(path), "--header")
    assert out.returncode == 0, out.stderr
    header, line = out.stdout.strip().splitlines()
    assert header == ("submission,tpr_at_1pct_fpr,auc,tpr_at_0p1pct_fpr,n_members,n_nonmembers,"
                      "auc_chance_p95,auc_beats_chance,tpr_ci95_low,tpr_ci95_high,"
                      "tpr_chance_p95,tpr_beats_chance")
    assert line == "alice,1.0000,1.0000,1.0000,300,300,0.5388,yes,0.9878,1.0000,0.0300,yes"
    assert "above chance" in out.stderr and "95% CI 0.988-1.000" in out.stderr


BAD_SUBMISSIONS = {
    "missing column": ("id,value\n0,1\n", "missing score"),
    "not a number": ("id,score\n0,high\n", "line 2: score must be a number, got 'high'"),
    "nan": ("id,score\n0,nan\n", "line 2: score must be finite"),
    "bad id": ("id,score\nzero,1\n", "line 2: id must be an integer"),
    "duplicate": ("id,score\n0,1\n0,2\n", "id 0 appears 2 times"),
    "unknown id": ("id,score\n0,1\n999,1\n", "not candidates of this challenge (first 999)"),
    "missing ids": ("id,score\n0,1\n", "candidate id(s) have no score (first 1)"),
    "empty": ("id,score\n", "has no rows"),
    "no header": ("", "missing id, score"),
}


@pytest.mark.parametrize("case", sorted(BAD_SUBMISSIONS))
def test_cli_grade_rejects_bad_submissions(key, tmp_path, case):
    path, _ = key
    text, message = BAD_SUBMISSIONS[case]
    sub = tmp_path / "bad.csv"
    sub.write_text(text)
    with pytest.raises(SubmissionError, match=None):
        grade(sub, path)
    out = _cli("lab", "grade", str(sub), "--key", str(path))
    assert out.returncode == 2
    assert out.stdout == ""
    err = out.stderr.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err, err
    assert err.startswith("fedaudit: error: ") and message in err, err


def test_cli_grade_missing_files(key, tmp_path):
    path, _ = key
    out = _cli("lab", "grade", str(tmp_path / "nope.csv"), "--key", str(path))
    assert out.returncode == 2 and "no such submission file" in out.stderr
    sub = tmp_path / "s.csv"
    sub.write_text("id,score\n0,1\n")
    out = _cli("lab", "grade", str(sub), "--key", str(tmp_path / "nokey.csv"))
    assert out.returncode == 2 and "no such key file" in out.stderr
    assert len(out.stderr.strip().splitlines()) == 1


def test_cli_challenge_rejects_a_negative_seed(tmp_path):
    out = _cli("lab", "challenge", "--seed", "-1", "--out", str(tmp_path))
    assert out.returncode == 2 and "seed must be a non-negative integer" in out.stderr
    assert not any(tmp_path.iterdir())


# ---- the notebooks and the challenge, executed (markers: labs, e2e) -------------------------

CHALLENGE_SEED = 0  # the seed lab 8 uses: the notebook reuses the challenge made here


@pytest.fixture(scope="module")
def lab_dir(tmp_path_factory):
    """One folder of lab runs for the module: labs that share a federation train it once."""
    path = tmp_path_factory.mktemp("lab-runs")
    saved = os.environ.get("FEDAUDIT_LAB_DIR")
    os.environ["FEDAUDIT_LAB_DIR"] = str(path)
    yield path
    if saved is None:
        os.environ.pop("FEDAUDIT_LAB_DIR", None)
    else:
        os.environ["FEDAUDIT_LAB_DIR"] = saved


@pytest.fixture(scope="module")
def notebook_cwd(tmp_path_factory):
    """One working directory for every notebook, as a student has (lab_run's cache is
    keyed by what the data paths hold, not where: test_lab_cache_is_shared_across_folders)."""
    return tmp_path_factory.mktemp("notebooks")


#: the challenge's MNIST (the npz copy of the shared data, never a download in a test); the
#: bundled digits where it is absent (too few non-members for a leaderboard: --allow-weak)
MNIST = ROOT.parent / "shared" / "data" / "mnist.npz"
CHALLENGE_DATA = (["--data", str(MNIST)] if MNIST.is_file()
                  else ["--data", "digits", "--allow-weak"])


@pytest.fixture(scope="module")
def challenge(lab_dir):
    out = _cli("lab", "challenge", "--seed", str(CHALLENGE_SEED), "--out", str(lab_dir),
               *CHALLENGE_DATA)
    assert out.returncode == 0, out.stderr[-3000:]
    root = Path(out.stdout.strip().splitlines()[-1])
    assert root == lab_dir / f"challenge-{CHALLENGE_SEED}"
    return root


@pytest.mark.labs
@pytest.mark.e2e  # Flower + Ray runs: make test's second pass, with two threads
def test_cli_challenge_round_trip(challenge, tmp_path):
    student = challenge / "student"
    assert sorted(p.name for p in student.iterdir()) == ["candidates.npz", "model.json",
                                                         "model.pt"]
    with open(challenge / "key.csv", newline="") as fh:
        rows = list(csv.DictReader(fh))
    ids = np.array([int(r["id"]) for r in rows])
    member = np.array([int(r["member"]) for r in rows])
    with np.load(student / "candidates.npz") as npz:
        assert sorted(npz.files) == ["id", "x", "y"]
        assert np.array_equal(np.sort(npz["id"]), np.sort(ids))
        assert len(npz["x"]) == len(ids)
    assert set(member.tolist()) == {0, 1}
    truth = write_submission(tmp_path / "truth.csv", ids, member)
    out = _cli("lab", "grade", str(truth), "--key", str(challenge / "key.csv"))
    assert out.returncode == 0, out.stderr
    name, tpr1, auc, *_ = out.stdout.strip().split(",")
    assert (name, float(tpr1), float(auc)) == ("truth", 1.0, 1.0)
    rnd = np.random.default_rng(0).random(len(ids))
    g = grade(write_submission(tmp_path / "random.csv", ids, rnd), challenge / "key.csv")
    assert abs(g.auc - 0.5) <= 4 * null_auc_sd(g.n_members, g.n_nonmembers)
    # a second challenge with the same seed and folder never replaces the key
    again = _cli("lab", "challenge", "--seed", str(CHALLENGE_SEED), "--out",
                 str(challenge.parent), *CHALLENGE_DATA)
    assert again.returncode == 2 and "already exists" in again.stderr
    info = json.loads((challenge / "challenge.json").read_text())
    assert (info["n_members"], info["n_nonmembers"]) == (int(member.sum()),
                                                        int((member == 0).sum()))
    if MNIST.is_file():  # the leaderboard's data: tens of false positives at 1% FPR
        assert info["n_nonmembers"] >= 2000 and not info["weak"]


def _execute(path: Path, cwd: Path):
    import nbformat
    from nbclient import NotebookClient
    from nbclient.exceptions import CellExecutionError

    nb = nbformat.read(path, as_version=4)
    client = NotebookClient(nb, timeout=600, kernel_name="python3",
                            resources={"metadata": {"path": str(cwd)}})
    try:
        client.execute()
    except CellExecutionError as exc:
        return nb, exc
    return nb, None


def _error_cell(nb):
    for i, cell in enumerate(nb.cells):
        for out in cell.get("outputs", []):
            if out.get("output_type") == "error":
                return i, out
    return None, None


LAB_SOURCES = sorted(p.stem for p in (LABS / "src").glob("lab*.py"))


def _needs(lab: str, request) -> None:
    """What a lab's notebook needs before it runs: lab 8 the challenge made by the fixture
    (the notebook reuses it); lab 9 a play to train on (tinyshakespeare.txt where
    ``fedaudit.labs.text_path`` looks: never a download), else the test is skipped."""
    if lab == "lab8_challenge":
        request.getfixturevalue("challenge")
    if lab == "lab9_secret_sharer":
        from fedaudit.labs import text_path

        try:
            text_path()
        except FileNotFoundError as exc:
            pytest.skip(f"lab 9 needs a text file: {exc}")


@pytest.mark.labs
@pytest.mark.e2e  # Flower + Ray runs: make test's second pass, with two threads
@pytest.mark.parametrize("lab", LAB_SOURCES)
def test_solution_notebook_passes_its_checks(lab, lab_dir, notebook_cwd, request):
    _needs(lab, request)
    nb, error = _execute(LABS / "solutions" / f"{lab}.ipynb", notebook_cwd)
    assert error is None, str(error)[-3000:]
    checks = [c for c in nb.cells if "check" in c.metadata.get("tags", [])]
    assert checks
    for cell in checks:
        text = "".join(o.get("text", "") for o in cell.outputs if o.get("name") == "stdout")
        assert text.startswith("ok  Task "), (lab, cell.source, text)
    assert not any(notebook_cwd.glob("lab-runs")), "runs must go to $FEDAUDIT_LAB_DIR"


@pytest.mark.labs
@pytest.mark.e2e  # Flower + Ray runs: make test's second pass, with two threads
@pytest.mark.parametrize("lab", LAB_SOURCES)
def test_student_notebook_fails_at_its_first_check(lab, lab_dir, notebook_cwd, request):
    _needs(lab, request)
    nb, error = _execute(LABS / f"{lab}.ipynb", notebook_cwd)
    assert error is not None, f"{lab}: the unfinished notebook ran to the end"
    index, out = _error_cell(nb)
    first_check = next(i for i, c in enumerate(nb.cells)
                       if "check" in c.metadata.get("tags", []))
    assert index == first_check, (lab, nb.cells[index].source if index is not None else None)
    assert out["ename"] == "LabCheckError"
    assert "is not done yet: the cell above still has a TODO" in out["evalue"], out["evalue"]
    # the message alone: no frames of the check's code around it
    assert out["traceback"] == [f"LabCheckError: {out['evalue']}"], out["traceback"]


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
    nb, error = _execute(path, tmp_path)
    assert error is not None
    _, out = _error_cell(nb)
    assert out["ename"] == "LabCheckError"
    assert out["evalue"].startswith("Task 2.1: you return p_y (the confidence attack)")
    assert out["traceback"] == [f"LabCheckError: {out['evalue']}"], out["traceback"]


def test_lab9_text_path_says_where_it_looked(tmp_path, monkeypatch):
    import fedaudit.labs.runs as runs

    monkeypatch.delenv(runs.TEXT_ENV, raising=False)
    monkeypatch.chdir(tmp_path)
    real_repo = runs._repo
    monkeypatch.setattr(runs, "_repo", lambda: tmp_path / "repo")
    with pytest.raises(FileNotFoundError,
                       match=r"no tinyshakespeare\.txt in .*FEDAUDIT_LAB_TEXT"):
        runs.text_path()
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "tinyshakespeare.txt").write_text("A:\nhello\n")
    assert runs.text_path() == (tmp_path / "data" / "tinyshakespeare.txt").resolve()
    play = tmp_path / "play.txt"
    play.write_text("B:\nworld\n")
    monkeypatch.setenv(runs.TEXT_ENV, str(play))  # the variable wins
    assert runs.text_path() == play.resolve()
    monkeypatch.setattr(runs, "_repo", real_repo)  # the scenario file: the repository's
    scenario, overrides = runs.secrets_target()
    assert overrides[-1] == f"data.path={json.dumps(str(play.resolve()))}"
    with pytest.raises(FileNotFoundError, match="no such text file"):
        runs.text_path(tmp_path / "absent.txt")


def test_lab9_scenario_is_the_repository_file():
    """From a source checkout the lab reads scenarios/shakespeare-secrets.toml next to the
    package (an installed package: the bundled copy), with repeats 1, 4 and 16 kept."""
    import tomllib

    from fedaudit.labs.runs import SECRETS_OVERRIDES, scenario_file

    path = scenario_file("shakespeare-secrets")
    assert path == ROOT / "scenarios" / "shakespeare-secrets.toml"
    raw = tomllib.loads(path.read_text(encoding="utf-8"))
    assert raw["canaries"]["repeats"] == [1, 4, 16] and raw["canaries"]["clients"] == [0, 1, 2]
    assert not any(o.startswith("canaries.repeats") or o.startswith("canaries.clients")
                   for o in SECRETS_OVERRIDES)


def test_todo_is_found_inside_containers():
    from fedaudit.labs import is_todo, require

    assert is_todo({"a": (1.0, todo("gap"))})
    assert not is_todo({"a": (1.0, 2.0)})
    with pytest.raises(LabCheckError, match=r"Task 3\.3 is not done yet.*\(gap\)"):
        require({"a": (1.0, todo("gap"))}, "3.3")


def test_lab_cache_key_ignores_the_folder_the_data_is_read_from(tmp_path, monkeypatch):
    from fedaudit.api import validate
    from fedaudit.labs.runs import cache_key

    keys = []
    for name in ("a", "b"):
        (tmp_path / name / "data").mkdir(parents=True)
        (tmp_path / name / "data" / "x.bin").write_bytes(b"same bytes")
        monkeypatch.chdir(tmp_path / name)
        keys.append(cache_key(validate("quickstart")))
    assert keys[0] == keys[1]
    (tmp_path / "b" / "data" / "x.bin").write_bytes(b"other bytes")  # other data: retrain
    assert cache_key(validate("quickstart")) != keys[0]


@pytest.mark.labs
@pytest.mark.e2e
def test_lab_cache_is_shared_across_folders(tmp_path, monkeypatch):
    import fedaudit.labs.runs as runs

    trained = []
    real_run = runs.run
    monkeypatch.setattr(runs, "run", lambda *a, **k: trained.append(1) or real_run(*a, **k))
    monkeypatch.setenv("FEDAUDIT_LAB_DIR", str(tmp_path / "lab-runs"))
    tiny = ("federation.rounds=1", "federation.num_clients=2", "audit.quantization.enabled=false",
            "audit.gnq.client=false", "attack.methods=['loss']")
    results = []
    for folder in ("course", "home"):
        (tmp_path / folder).mkdir()
        monkeypatch.chdir(tmp_path / folder)
        results.append(runs.lab_run("quickstart", tiny).results)
    assert len(trained) == 1
    assert results[0]["attacks"] == results[1]["attacks"]


# ---- the leaderboard's chance levels --------------------------------------------------------

def test_fp_budget_counts_false_positives_as_the_metrics_do():
    from fedaudit.labs.leaderboard import fp_budget

    # 1% of 2,500 = 25; of 216: 2 (3/216 = 1.4%); 1/100 is exactly 1%; 1/99 is above it
    assert [fp_budget(n) for n in (2500, 216, 100, 99, 1)] == [25, 2, 1, 0, 0]


def test_tpr_interval_is_clopper_pearson():
    from fedaudit.labs.leaderboard import tpr_interval

    # closed forms at the ends: 0 of n -> (0, 1 - (a/2)^(1/n)); n of n -> ((a/2)^(1/n), 1)
    low, high = tpr_interval(0.0, 100)
    assert low == 0.0 and high == pytest.approx(1 - 0.025 ** (1 / 100), rel=1e-9)
    low, high = tpr_interval(1.0, 40)
    assert high == 1.0 and low == pytest.approx(0.025 ** (1 / 40), rel=1e-9)


def test_chance_level_matches_random_submissions():
    """The exact negative-hypergeometric chance level against 4,000 random submissions
    graded by fedaudit.metrics (an independent computation: permutations and ROC points)."""
    from fedaudit.labs.leaderboard import chance
    from fedaudit.metrics import tpr_at_fpr

    n1, n0, reps = 300, 700, 4000  # k = 7 false positives at 1% FPR
    c = chance(n1, n0)
    assert c.false_positives == 7
    assert c.tpr_mean == pytest.approx(8 / 701, rel=1e-12)  # (k + 1) / (n0 + 1)
    rng = np.random.default_rng(5)
    member = np.r_[np.ones(n1, int), np.zeros(n0, int)]
    tprs = np.array([tpr_at_fpr(rng.random(n1 + n0), member, 0.01) for _ in range(reps)])
    # the simulated mean within 4 standard errors (exceeded with probability 6e-5)
    assert abs(tprs.mean() - c.tpr_mean) <= 4 * tprs.std() / math.sqrt(reps)
    # p95 is a quantile of a discrete law: P(X <= p95) >= 0.95 > P(X < p95); the simulated
    # shares within 4 binomial standard errors of that
    se = 4 * math.sqrt(0.95 * 0.05 / reps)
    assert np.mean(tprs <= c.tpr_p95 + 1e-12) >= 0.95 - se
    assert np.mean(tprs < c.tpr_p95 - 1e-12) <= 0.95 + se


def test_a_seed_where_loss_does_not_beat_chance_is_refused():
    from fedaudit.labs.challenge import WeakChallengeError, require_beats_chance
    from fedaudit.labs.leaderboard import leaderboard_line

    member = np.r_[np.ones(250, int), np.zeros(2500, int)]
    # LOSS-like scores: members ahead on average, but not at the top (AUC about 0.6)
    rng = np.random.default_rng(3)
    weak = np.r_[rng.normal(0.35, 1, 250), rng.normal(0, 1, 2500)]
    weak[250:275] = 10.0  # the 25 most confident candidates are non-members: TPR@1%FPR 0
    line = leaderboard_line("loss-baseline", weak, member)
    assert line.auc > 0.55 and line.tpr_at_1pct_fpr == 0.0 and not line.tpr_beats_chance
    require_beats_chance(3, line)  # the rank is the AUC: this seed can rank a leaderboard
    noise_line = leaderboard_line("loss-baseline", np.zeros(2750), member)  # AUC 0.5: all tied
    with pytest.raises(WeakChallengeError, match=r"seed 3: the LOSS attack's AUC 0\.\d{4} is "
                                                 r"not above random submissions' 95th"):
        require_beats_chance(3, noise_line)


def test_cli_challenge_without_mnist_says_how_to_get_it(tmp_path):
    out = _cli("lab", "challenge", "--seed", "1", "--out", str(tmp_path), cwd=tmp_path)
    assert out.returncode == 2, out.stderr[-2000:]
    err = out.stderr.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err, err
    assert "data.dataset = 'mnist': not found" in err and "--download" in err, err
    assert not any(tmp_path.iterdir())  # nothing written, no half-made challenge


def test_cli_challenge_rejects_unknown_data(tmp_path):
    out = _cli("lab", "challenge", "--seed", "1", "--out", str(tmp_path), "--data", "svhn")
    assert out.returncode == 2
    assert "--data 'svhn': allowed: mnist, digits, or a path to an .npz file" in out.stderr
