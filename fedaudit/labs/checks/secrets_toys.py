"""The toy cases of lab 9's checks (:mod:`fedaudit.labs.checks.secrets`): the explicit
next-token table :class:`ToyModel`, the rules each listed mistake follows and the mistakes
themselves, and the helpers that read a run's secrets."""

from __future__ import annotations

import math

import numpy as np

from fedaudit.labs.checks import SCORE_TOL, as_number, fail
from fedaudit.labs.todo import require
from fedaudit.secrets import candidate_index

_LN2 = math.log(2.0)


#: the toy vocabulary's size; its template and its secret's alphabet
TOY_V = 7


TOY_PREFIX = (4, 5, 6)


TOY_ALPHABET = (1, 2, 3)


#: a secret's Px agrees within this many bits (5 tokens, each within SCORE_TOL nats)
PX_TOL = 5 * SCORE_TOL / _LN2


class ToyModel:
    """An explicit next-token table: after a context of length T >= 1 ending in token t the
    distribution is ``table[T % 5, t]``; after the empty context, ``empty``.  Called like a
    language model: contexts (B, T) int64 -> natural-log probabilities (B, V)."""

    def __init__(self, table: np.ndarray, empty: np.ndarray) -> None:
        self.table, self.empty = table, empty

    def __call__(self, contexts) -> np.ndarray:
        c = np.asarray(contexts)
        if c.ndim != 2 or not (c.size == 0 or np.issubdtype(c.dtype, np.integer)):
            raise ValueError("next_log_probs takes a 2-D integer array of contexts (B, T), one "
                             f"row per context, e.g. context[None, :]; got shape {c.shape}")
        if c.shape[1] == 0:
            return np.log(np.broadcast_to(self.empty, (len(c), TOY_V))).copy()
        return np.log(self.table[c.shape[1] % 5, c[:, -1]])


def toy_model(seed: int = 9) -> ToyModel:
    """The toy table of the checks (Dirichlet(0.6) rows, a fixed seed)."""
    rng = np.random.default_rng(seed)
    return ToyModel(rng.dirichlet(np.full(TOY_V, 0.6), size=(5, TOY_V)),
                    rng.dirichlet(np.full(TOY_V, 0.6)))


def _px_rule(model: ToyModel, prefix, secret, rule: str) -> float:
    """Px of ``secret`` after ``prefix`` in bits, or one of the listed mistakes."""
    nats = []
    for i, tok in enumerate(secret):
        context = {"right": list(prefix) + list(secret[:i]),
                   "no prefix": list(secret[:i]),
                   "token in its context": list(prefix) + list(secret[:i + 1])}[
            rule if rule in ("no prefix", "token in its context") else "right"]
        nats.append(-model(np.array([context], dtype=np.int64))[0, tok])
    total = float(np.sum(nats))
    return {"natural log": total, "sign": -total / _LN2,
            "mean": total / _LN2 / len(secret)}.get(rule, total / _LN2)


_PX_MISTAKES = {
    "natural log": "your Px is in nats: log-perplexity is in BITS (log2, or natural logs "
                   "divided by ln 2)",
    "sign": "your Px is negative: log-perplexity is MINUS the sum of the log-probabilities "
            "(a likely secret has a LOW Px)",
    "no prefix": "you left out the prefix: the context of the secret's token i is the "
                 "template (prefix) followed by the secret's first i tokens",
    "token in its context": "the context of token i holds token i itself: predict "
                            "secret[i] from prefix + secret[:i], the tokens BEFORE it",
    "mean": "your Px is a mean over the secret's tokens: Px SUMS -log2 Pr over them (for "
            "secrets of one length the ranks would not change, but Px is the sum)",
}


#: 8 candidates (|R| = 8: 3 bits) with a three-way tie at Px 2
_TOY_PX = np.array([3.0, 1.0, 2.0, 2.0, 5.0, 2.0, 4.0, 8.0])


_TOY_SECRETS = (2.0, 1.0, 4.0, 8.0)


def _toy_exposure(rule: str, s: float, px: np.ndarray = _TOY_PX) -> float:
    n, le, lt, ge = len(px), int((px <= s).sum()), int((px < s).sum()), int((px >= s).sum())
    rank = {"right": le, "ties in favour": lt + 1, "rank from 0": lt,
            "rank from 0, at least 1": max(lt, 1), "secret not counted": le - 1,
            "descending": ge, "natural log": le, "no log2 |R|": le}[rule]
    if rank < 1:
        return math.inf
    if rule == "natural log":
        return math.log(n) - math.log(rank)
    if rule == "no log2 |R|":
        return -math.log2(rank)
    return math.log2(n) - math.log2(rank)


_OFF_BY_ONE = ("off by one: the rank counts every candidate with Px <= the secret's, the "
               "secret ITSELF included, so the most likely candidate has rank 1, not 0")


_EXPOSURE_MISTAKES = {
    "ties in favour": "ties are counted in the secret's favour: the rank counts the "
                      "candidates with Px <= the secret's (<=, not <): a candidate tied with "
                      "the secret ranks AHEAD of it (the paper's definition)",
    "rank from 0": _OFF_BY_ONE,
    "rank from 0, at least 1": _OFF_BY_ONE,
    "secret not counted": _OFF_BY_ONE,
    "descending": "your rank is reversed: the most likely candidate has the LOWEST "
                  "log-perplexity and rank 1",
    "natural log": "your exposure is in nats: exposure = log2 |R| - log2 rank, in BITS",
    "no log2 |R|": "exposure = log2 |R| - log2 rank: you left out log2 |R| (|R| = the number "
                   "of candidates, len(all_px))",
}


def codes(lm) -> np.ndarray:
    """Each secret's index among the candidates (its alphabet positions read in base |A|)."""
    return candidate_index(lm.secrets.tokens, lm.secrets.alphabet)


def _bounds(px_all: np.ndarray, px: np.ndarray, tol: float) -> tuple[np.ndarray, np.ndarray]:
    """The exposures a Px within ``tol`` of each of ``px`` can have among ``px_all``."""
    srt = np.sort(px_all)
    n = math.log2(len(srt))
    hi_rank = np.searchsorted(srt, px + tol, side="right")
    lo_rank = np.maximum(np.searchsorted(srt, px - tol, side="right"), 1)
    return n - np.log2(hi_rank), n - np.log2(lo_rank)


def _results_exposure(results: dict, view) -> np.ndarray:
    """Per secret: its exposure on the global model (view None) or on its client's model."""
    if view is None:
        return np.array([e["exposure"] for e in results["secrets"]], dtype=np.float64)
    return np.array([e["server_view"]["exposure"] if e["server_view"] else np.nan
                     for e in results["secrets"]], dtype=np.float64)


def _by_repeats(expo: np.ndarray, repeats: np.ndarray, mask: np.ndarray) -> dict[int, float]:
    return {int(k): float(np.mean(expo[mask & (repeats == k)]))
            for k in sorted(set(repeats[mask].tolist()))}


def _as_dict(task: str, value, want: dict[int, float], name: str) -> dict[int, float]:
    require(value, task)
    if not isinstance(value, dict):
        fail(task, f"make {name} a dict {{repeats: mean exposure}}")
    try:
        got = {int(k): v for k, v in value.items()}
    except (TypeError, ValueError):
        fail(task, f"{name}'s keys must be the numbers of repeats (0 = the references)")
    if set(got) != set(want):
        hint = (" (the never-inserted references are repeats 0: include them, they are the "
                "baseline)" if 0 in want and 0 not in got else "")
        fail(task, f"{name} needs one entry per number of repeats, {sorted(want)}; you have "
                   f"{sorted(got)}{hint}")
    return {k: as_number(task, v, f"{name}[{k}]") for k, v in got.items()}


def _greedy_rule(model, prefix, alphabet, length: int, rule: str) -> np.ndarray:
    """Greedy decoding over the alphabet, or one of the listed mistakes."""
    alphabet = np.asarray(alphabet)
    out: list[int] = []
    for _ in range(length):
        context = {"no feedback": list(prefix), "no prefix": out}.get(rule, list(prefix) + out)
        logp = model(np.array([context], dtype=np.int64))[0]
        if rule == "whole vocabulary":
            out.append(int(np.argmax(logp)))
        else:
            pick = np.argmin if rule == "least likely" else np.argmax
            out.append(int(alphabet[int(pick(logp[alphabet]))]))
    if rule == "positions":  # the right tokens, returned as their positions in the alphabet
        return np.array([int(np.flatnonzero(alphabet == t)[0]) for t in out], dtype=np.int64)
    return np.array(out, dtype=np.int64)


_GREEDY_MISTAKES = {
    "positions": "you return positions in the alphabet; return the tokens themselves "
                 "(alphabet[j])",
    "whole vocabulary": "your decoder picks tokens outside the alphabet: the attacker knows "
                        "the format (digits), so take the most likely token AMONG the "
                        "alphabet's",
    "no feedback": "each step must see what was decoded so far: the context of step i is "
                   "the prefix followed by the i tokens already chosen",
    "no prefix": "decoding starts from the template: the context of step i is the prefix "
                 "followed by the tokens already chosen",
    "least likely": "greedy takes the MOST likely next token (the highest log-probability)",
}
