"""Each mistake a lab task warns about, fed to its check (``MISTAKES``), and the toy inputs
the checks are fed: results.json entries, ROC toys, lab 9's toy language models.  Only
fedaudit, numpy, scipy and scikit-learn are imported here: experiments/lab_check_messages.py
loads this file by path, with whichever fedaudit is importable."""

from __future__ import annotations

import math

import numpy as np


# ---- each mistake a task warns about, fed to its check ----------------------------------------
#
# One row per mistake: the check, what the student got wrong, the student's code (or value),
# and a pattern the failure must match (it names the concept).  experiments/lab_check_messages.py
# prints these rows' messages as the table of docs/validation.md section 11.

_AR4 = np.arange(4)


def p_label(p, y):
    return p[np.arange(len(y)), y]


def roc_with(tpr_rule):
    from sklearn.metrics import roc_auc_score, roc_curve

    def roc_summary(s, m):
        fpr, tpr, _ = roc_curve(m, s, drop_intermediate=False)
        return float(roc_auc_score(m, s)), float(tpr_rule(fpr, tpr))
    return roc_summary


def toy_roc():
    rng = np.random.default_rng(0)
    member = rng.integers(0, 2, 400)
    return member + rng.normal(0, 1.0, 400), member


def loss_results(auc=0.6, tpr=0.0, members=250, nonmembers=200):
    return {"attacks": {"loss": {"auc": auc, "tpr_at_1pct_fpr": tpr,
                                 "min_fpr_resolution": 1.0 / nonmembers}},
            "clients": [{"attack_set": {"members": members}}]}


def server_results():
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


def gnq_toy():
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


def toy_leaderboard_line(auc, tpr):
    from fedaudit.labs.leaderboard import LeaderboardLine, chance, null_auc_sd

    return LeaderboardLine("s", auc, tpr, 0.0, 1000, 2500, 0.0, 1.0, chance(1000, 2500),
                           null_auc_sd(1000, 2500))


def secrets_toy():
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


def px_bits(model, prefix, secret, ln=False, context=None):
    """Px of the toy table by hand (bits), or in nats, or with another context rule."""
    seq, nats = list(prefix), 0.0
    for i, tok in enumerate(secret):
        ctx = context(list(prefix), list(secret), i) if context else seq
        nats -= model(np.array([ctx]))[0, tok]
        seq = seq + [tok]
    return nats if ln else nats / math.log(2)


def rank_exposure(rank_of):
    def exposure(secret_px, all_px):
        r = rank_of(secret_px, np.asarray(all_px))
        return math.log2(len(all_px)) - math.log2(r) if r > 0 else math.inf
    return exposure


def greedy_with(step):
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

    toy_s, toy_m = toy_roc()
    # 8 members on top (TPR 0.8 at FPR 0), a non-member, 2 members, 10 non-members
    exact80 = (np.r_[np.arange(10.0, 2.0, -1), 2.5, 2.0, 1.5, -np.arange(1.0, 11.0)],
               np.r_[np.ones(8, int), 0, 1, 1, np.zeros(10, int)])
    sv = server_results()
    g = gnq_toy()
    loss_rows = {"target": np.array(["global"] * 6), "method": np.array(["loss"] * 6),
                 "member": np.ones(6, int), "sample_id": np.arange(6),
                 "score": np.array([1.0, 2.0, 3.0, 5.0, 4.0, 6.0])}
    gnq6 = {"sample_id": np.arange(6), "score": np.array([1.0, 2.0, 3.0, 4.0, 5.0, 6.0])}
    return [
        ("2.1", "returns the loss, not -loss",
         lambda: loss_attack.loss_scores(lambda p, y: -np.log(np.maximum(p_label(p, y), 1e-30))),
         "higher for members"),
        ("2.1", "returns p_y (the confidence)",
         lambda: loss_attack.loss_scores(lambda p, y: p_label(p, y)), "confidence attack"),
        ("2.1", "log of the largest probability, not of the true label's",
         lambda: loss_attack.loss_scores(lambda p, y: np.log(np.maximum(p.max(axis=1), 1e-30))),
         "TRUE label"),
        ("2.1", "no log guard (p_y = 0 gives log 0)",
         lambda: loss_attack.loss_scores(lambda p, y: np.log(p_label(p, y))), "guard the log"),
        ("2.2", "interpolates: np.interp(0.01, fpr, tpr)",
         lambda: loss_attack.roc_summary(roc_with(lambda f, t: np.interp(0.01, f, t)),
                                         toy_s, toy_m), "interpolat"),
        ("2.2", "strict fpr < 0.01",
         lambda: loss_attack.roc_summary(roc_with(lambda f, t: t[f < 0.01].max()),
                                         toy_s, toy_m), r"fpr <= 0\.01, not fpr < 0\.01"),
        ("2.2", "off by one: tpr[np.searchsorted(fpr, 0.01)]",
         lambda: loss_attack.roc_summary(roc_with(lambda f, t: t[np.searchsorted(f, 0.01)]),
                                         toy_s, toy_m), "off-by-one"),
        ("2.2", "reversed score",
         lambda: loss_attack.roc_summary(lambda s, m: roc_with(
             lambda f, t: t[f <= 0.01].max())(-s, m), toy_s, toy_m), "higher means member"),
        ("2.3", "AUC of a reversed score",
         lambda: loss_attack.matches_fedaudit(0.41, loss_results(0.59)),
         "higher means member"),
        ("2.3", "my_tpr wrong (0.05 where fedaudit has 0.0)",
         lambda: loss_attack.matches_fedaudit(0.6, loss_results(), 0.05),
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
        ("8.2", "reversed score", lambda: challenge.beats_chance(toy_leaderboard_line(0.43, 0.0)),
         "higher means member"),
        ("8.2", "AUC within noise of chance",
         lambda: challenge.beats_chance(toy_leaderboard_line(0.52, 0.012)), "standard deviations above"),
        ("9.1", "natural log instead of log2",
         lambda: sc.log_perplexity(lambda f, p, s: px_bits(f, p, s, ln=True)), "in nats"),
        ("9.1", "log-likelihood, not minus it",
         lambda: sc.log_perplexity(lambda f, p, s: -px_bits(f, p, s)), "MINUS the sum"),
        ("9.1", "prefix forgotten (contexts start from the secret alone)",
         lambda: sc.log_perplexity(lambda f, p, s: px_bits(
             f, p, s, context=lambda pre, sec, i: sec[:i])), "left out the prefix"),
        ("9.1", "the context holds the token it predicts",
         lambda: sc.log_perplexity(lambda f, p, s: px_bits(
             f, p, s, context=lambda pre, sec, i: pre + sec[:i + 1])), "holds token i itself"),
        ("9.1", "mean over the tokens, not the sum",
         lambda: sc.log_perplexity(lambda f, p, s: px_bits(f, p, s) / len(s)), "SUMS"),
        ("9.1", "a 1-D context passed to next_log_probs",
         lambda: sc.log_perplexity(lambda f, p, s: float(-f(np.asarray(p))[0, s[0]])),
         "2-D integer array"),
        ("9.2", "ties counted in the secret's favour (rank = #(<) + 1)",
         lambda: sc.exposure(rank_exposure(lambda s, a: int((a < s).sum()) + 1)),
         "ties are counted in the secret's favour"),
        ("9.2", "rank from 0 (rank = #(<))",
         lambda: sc.exposure(rank_exposure(lambda s, a: int((a < s).sum()))), "off by one"),
        ("9.2", "the secret not counted (rank = #(<=) - 1)",
         lambda: sc.exposure(rank_exposure(lambda s, a: int((a <= s).sum()) - 1)),
         "off by one"),
        ("9.2", "reversed rank (#(>=))",
         lambda: sc.exposure(rank_exposure(lambda s, a: int((a >= s).sum()))), "reversed"),
        ("9.2", "natural log instead of log2",
         lambda: sc.exposure(lambda s, a: math.log(len(a)) - math.log(int((a <= s).sum()))),
         "in nats"),
        ("9.2", "log2 |R| left out",
         lambda: sc.exposure(lambda s, a: -math.log2(int((a <= s).sum()))), "left out log2 |R|"),
        ("9.2", "exposures of another model's candidates",
         lambda: (lambda t: sc.exposures(t.expo0, t.px, t.lm, t.results))(secrets_toy()),
         "fedaudit.secrets.exposure of the same"),
        ("9.3", "the references left out",
         lambda: (lambda t: sc.by_repeats({1: 0.0, 16: 0.0}, t.expo, t.lm, t.results))(
             secrets_toy()), "references are repeats 0"),
        ("9.3", "median instead of mean",
         lambda: (lambda t: sc.by_repeats(
             {int(k): float(np.median(t.expo[t.sec.repeats == k])) for k in (0, 1, 16)},
             t.expo, t.lm, t.results))(secrets_toy()), "median"),
        ("9.3", "server view: every client's secrets on client 0's model",
         lambda: (lambda t: sc.server_view(
             {int(k): float(t.expo0[t.sec.repeats == k].mean()) for k in (0, 1, 16)},
             t.expo0, t.px0, t.lm0, t.results))(secrets_toy()), "ITS OWN secrets"),
        ("9.3", "server view: the global model's exposures",
         lambda: (lambda t: sc.server_view(
             {int(k): float(t.expo[t.mine & (t.sec.repeats == k)].mean()) for k in (0, 1, 16)},
             t.expo0, t.px0, t.lm0, t.results))(secrets_toy()), "GLOBAL model's numbers"),
        ("9.4", "argmax over the whole vocabulary",
         lambda: sc.greedy(greedy_with(lambda lp, a: int(np.argmax(lp)))), "outside the alphabet"),
        ("9.4", "the least likely token",
         lambda: sc.greedy(greedy_with(lambda lp, a: int(a[np.argmin(lp[a])]))), "MOST likely"),
        ("9.4", "decoded tokens not fed back",
         lambda: sc.greedy(lambda f, p, a, n: np.array(
             [int(a[np.argmax(f(np.array([list(p)]))[0][a])])] * n)), "decoded so far"),
        ("9.4", "positions in the alphabet returned",
         lambda: sc.greedy(lambda f, p, a, n: np.searchsorted(
             np.asarray(a), greedy_with(lambda lp, al: int(al[np.argmax(lp[al])]))(f, p, a, n))),
         "positions in the alphabet"),
        ("9.4", "decoded on another view's model",
         lambda: (lambda t: sc.extraction(
             {"global": t.lm.decode(greedy_with(lambda lp, a: int(a[np.argmax(lp[a])]))(
                 t.lm0.next_log_probs, t.sec.prefix, t.sec.alphabet, 2))},
             {"global": t.lm}, t.results))(secrets_toy()), "differs from greedy decoding"),
        ("9.4", "Spearman with one column negated",
         # GNQ 80, 20, 60, 40 against the toy's exposures: computed by the check
         lambda: (lambda t: sc.gnq_vs_exposure(-spearman_toy(t), t.results))(secrets_toy()),
         "sign is reversed"),
    ]


def spearman_toy(t):
    from scipy.stats import spearmanr

    return float(spearmanr([80.0, 20.0, 60.0, 40.0], t.expo[:4]).statistic)


MISTAKES = _mistakes()



def _lab10_mistakes():
    """Lab 10's rows, from mistakes_lab10.py beside this file (loaded by path, as
    experiments/lab_check_messages.py loads this one)."""
    import importlib.util
    from pathlib import Path

    spec = importlib.util.spec_from_file_location(
        "lab10_mistakes", Path(__file__).with_name("mistakes_lab10.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.mistakes()


MISTAKES = MISTAKES + _lab10_mistakes()
