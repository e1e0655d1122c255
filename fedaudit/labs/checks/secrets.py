"""Checks of lab 9, the secret sharer in a federation: log-perplexity, rank and exposure,
exposure by repeats on the global model and the server's view, greedy extraction and GNQ.

The toy cases are an explicit next-token probability table (:class:`ToyModel`: the
distribution after a context depends on its length and its last token, and the empty
context has a row of its own), so each mistake a task warns about gives its own number:
natural logs instead of bits, a forgotten prefix, a context that already holds the token it
predicts, ties counted in the secret's favour, a rank from 0, a decoder that leaves the
alphabet or forgets what it decoded.

Tolerances.  A student's function is run on the same model as fedaudit's
(:func:`fedaudit.labs.language_model` uses the secrets stage's own next-token callable), but
with other batch shapes: a float32 logit may move by a few ulps, so a log-probability agrees
to :data:`~fedaudit.labs.checks.SCORE_TOL` (1e-4 nats) and a secret's Px, a sum over its
tokens, to ``length * SCORE_TOL / ln 2`` bits.  Exposures computed from the same
candidates' Px are compared with fedaudit's :func:`fedaudit.secrets.exposure` exactly (1e-12);
against results.json (the run's own enumeration) an exposure may differ by the candidates
within ``PX_TOL`` bits of the secret's Px, which a rounding could reorder: the accepted
interval is ``log2 |R| - log2 rank`` for the rank with and without them.
"""

from __future__ import annotations

import math

import numpy as np
from scipy.stats import spearmanr

from fedaudit.labs.checks import (EXACT_REL, SCORE_TOL, as_array, as_number, call, close,
                                  direction, fail, ok)
from fedaudit.labs.todo import require
# the toy cases and the mistakes' rules (tests/labs/test_checks.py reads them from here too)
from fedaudit.labs.checks.secrets_toys import (  # noqa: F401
    _EXPOSURE_MISTAKES, _GREEDY_MISTAKES, _LN2, _OFF_BY_ONE, _PX_MISTAKES, _TOY_PX,
    _TOY_SECRETS, PX_TOL, TOY_ALPHABET, TOY_PREFIX, TOY_V, ToyModel, _as_dict, _bounds,
    _by_repeats, _greedy_rule, _px_rule, _results_exposure, _toy_exposure, codes, toy_model)
from fedaudit.secrets import beam_decode
from fedaudit.secrets import exposure as fed_exposure
from fedaudit.secrets import log_perplexities as fed_log_perplexities

__all__ = ["PX_TOL", "TOY_ALPHABET", "TOY_PREFIX", "ToyModel", "by_repeats", "exposure",
           "exposures", "extraction", "gnq_vs_exposure", "greedy", "log_perplexity",
           "server_view", "toy_model"]


# ---- Task 9.1: log-perplexity ----------------------------------------------------------------


def log_perplexity(fn, lm=None) -> None:
    """Task 9.1: ``fn(next_log_probs, prefix, secret)`` = Px in bits, on the toy table
    (each listed mistake named) and, with ``lm``, on every secret of the run against
    :func:`fedaudit.secrets.log_perplexities`."""
    task = "9.1"
    require(fn, task)
    model = toy_model()
    for secret in ((3, 1, 2, 2), (1, 1, 3)):
        got = as_number(task, call(task, fn, model, np.array(TOY_PREFIX), np.array(secret)),
                        "Px (toy)")
        want = _px_rule(model, TOY_PREFIX, secret, "right")
        if close(got, want, 1e-9):
            continue
        for rule, message in _PX_MISTAKES.items():
            if close(got, _px_rule(model, TOY_PREFIX, secret, rule), 1e-9):
                fail(task, message)
        fail(task, f"on a toy table (prefix {list(TOY_PREFIX)}, secret {list(secret)}) your Px "
                   f"is {direction(got, want)}: Px = -sum over i of log2 Pr(secret[i] | "
                   "prefix + secret[:i]), Pr read from next_log_probs (natural logs)")
    if lm is None:
        ok(task, "log-perplexity right on the toy table")
        return
    sec = lm.secrets
    want = fed_log_perplexities(lm.next_log_probs, sec.prefix, sec.tokens)
    got = np.array([as_number(task, call(task, fn, lm.next_log_probs, sec.prefix, t), "Px")
                    for t in sec.tokens])
    tol = sec.tokens.shape[1] * SCORE_TOL / _LN2
    bad = np.flatnonzero(np.abs(got - want) > tol)
    if bad.size:
        s = int(bad[0])
        fail(task, f"secret {lm.decode(sec.tokens[s])}: your Px on the {lm.name} is "
                   f"{direction(got[s], want[s])} ({bad.size} of {len(want)} secrets differ; "
                   "the toy table passed: do you pass lm.secrets.prefix as the prefix?)")
    planted = sec.client >= 0
    ok(task, f"Px of the {len(want)} secrets on the {lm.name} agree with fedaudit's "
             f"(mean {want[planted].mean():.2f} bits planted, {want[~planted].mean():.2f} "
             "references)")


# ---- Task 9.2: rank and exposure ---------------------------------------------------------------


def exposure(fn) -> None:
    """Task 9.2: ``fn(secret_px, all_px)`` = log2 |R| - log2 rank on a toy set of 8
    candidates with a three-way tie (each listed mistake named)."""
    task = "9.2"
    require(fn, task)
    for s in _TOY_SECRETS:
        out = call(task, fn, s, _TOY_PX.copy())
        try:
            got = float(out)
        except (TypeError, ValueError):
            fail(task, f"return one number (the exposure of secret_px), got {type(out).__name__}")
        want = _toy_exposure("right", s)
        if close(got, want, 1e-9):
            continue
        if not math.isfinite(got):
            fail(task, f"your exposure is {got} (a log2 of rank 0?): " + _OFF_BY_ONE)
        for rule, message in _EXPOSURE_MISTAKES.items():
            if close(got, _toy_exposure(rule, s), 1e-9):
                fail(task, message)
        fail(task, f"candidates with Px {_TOY_PX.tolist()}, a secret of Px {s}: your exposure "
                   f"is {direction(got, want)} (rank = the number of candidates with Px <= the "
                   "secret's; exposure = log2 |R| - log2 rank)")
    ok(task, "rank and exposure right on the toy candidates (ties counted against the secret)")


def exposures(expo, all_px, lm, results: dict) -> None:
    """Task 9.2, on the run: one exposure per secret (planting order) = fedaudit's
    :func:`fedaudit.secrets.exposure` of the same candidates' Px, and results.json's."""
    task = "9.2"
    px_all = as_array(task, all_px, "all_px", dtype_kind="f")
    sec = lm.secrets
    got = as_array(task, expo, "expo", shape=(sec.size,))
    space = len(sec.alphabet) ** sec.tokens.shape[1]
    if px_all.shape != (space,):
        fail(task, f"all_px must hold every candidate's Px ({space} of them), got shape "
                   f"{px_all.shape}")
    own = px_all[codes(lm)]
    want = np.asarray(fed_exposure(own, px_all), dtype=np.float64)
    bad = np.flatnonzero(~(np.abs(got - want) <= 1e-12))
    if bad.size:
        s = int(bad[0])
        fail(task, f"secret {lm.decode(sec.tokens[s])}: your exposure is "
                   f"{direction(got[s], want[s])}, compared with fedaudit.secrets.exposure of "
                   f"the same numbers ({bad.size} of {sec.size} differ): read each secret's "
                   "Px from all_px at the secret's index (its digits read as a number) and "
                   "pass all_px whole as the candidates")
    low, high = _bounds(px_all, own, PX_TOL)
    res = _results_exposure(results, None)
    out = np.flatnonzero(~((res >= low - 1e-12) & (res <= high + 1e-12)))
    if out.size:
        s = int(out[0])
        fail(task, f"secret {lm.decode(sec.tokens[s])}: your exposure differs from results.json "
                   "secrets[].exposure beyond rounding: enumerate the candidates on the GLOBAL "
                   "model (language_model(run)) after lm.secrets.prefix")
    ok(task, f"{sec.size} exposures equal fedaudit's (max {got.max():.2f} of "
             f"{math.log2(space):.2f} bits)")


# ---- Task 9.3: exposure by repeats -------------------------------------------------------------


def by_repeats(values, expo, lm, results: dict) -> None:
    """Task 9.3: mean exposure on the global model by repeats (0 = the references), from
    the student's exposures and equal to results.json ``secrets_summary.global``."""
    task = "9.3"
    sec = lm.secrets
    e = as_array(task, expo, "expo", shape=(sec.size,))
    want = _by_repeats(e, sec.repeats, np.ones(sec.size, dtype=bool))
    got = _as_dict(task, values, want, "by_repeats")
    median = {int(k): float(np.median(e[sec.repeats == k])) for k in want}
    for k in sorted(want):
        if not close(got[k], want[k], 1e-9 * max(1.0, abs(want[k]))):
            if close(got[k], median[k], 1e-12) and not close(median[k], want[k], 1e-9):
                fail(task, f"repeats {k}: you took a median; take the MEAN over the secrets")
            fail(task, f"repeats {k}: your mean exposure is {direction(got[k], want[k])}: "
                       "average expo over the secrets with lm.secrets.repeats == k (k = 0: "
                       "the references)")
    summary = {int(k): v for k, v in results["secrets_summary"]["global"]["mean_exposure"].items()}
    if set(summary) != set(want):
        fail(task, "results.json holds other repeats than lm.secrets: is lm the run's model?")
    ok(task, "mean exposure on the global model by repeats: "
       + ", ".join(f"{'references' if k == 0 else f'x{k}'} {want[k]:.2f}" for k in sorted(want))
       + " bits (results.json: " + ", ".join(f"{summary[k]:.2f}" for k in sorted(want)) + ")")


def server_view(values, expo0, all_px0, lm0, results: dict, client: int = 0) -> None:
    """Task 9.3 (the server's view): on client ``client``'s model, the mean exposure by
    repeats of that client's own secrets and of the references (results.json
    ``secrets_summary.clients[]``)."""
    task = "9.3"
    sec = lm0.secrets
    e = as_array(task, expo0, "expo0", shape=(sec.size,))
    px_all = as_array(task, all_px0, "all_px0", dtype_kind="f")
    mine = (sec.client == client) | (sec.client < 0)
    want = _by_repeats(e, sec.repeats, mine)
    entry = next((c for c in results["secrets_summary"]["clients"] if c["client"] == client),
                 None)
    if entry is None:
        fail(task, f"results.json has no server view of client {client}")
    summary = {int(k): v for k, v in entry["mean_exposure"].items()}
    # the per-secret numbers first: the student's enumeration on client's model
    own = px_all[codes(lm0)]
    if not np.allclose(e, np.asarray(fed_exposure(own, px_all)), rtol=0, atol=1e-12):
        fail(task, "expo0: compute every secret's exposure on client "
                   f"{client}'s model with your exposure() and all_px0, as in Task 9.2")
    low, high = _bounds(px_all, own, PX_TOL)
    res = _results_exposure(results, client)
    theirs = sec.client == client
    if not np.all((res[theirs] >= low[theirs] - 1e-12) & (res[theirs] <= high[theirs] + 1e-12)):
        glob = _results_exposure(results, None)
        if np.allclose(e[theirs], glob[theirs], rtol=0, atol=1e-9):
            fail(task, "these are the GLOBAL model's exposures: enumerate all_px0 on client "
                       f"{client}'s model, language_model(run, {client})")
        fail(task, f"your exposures of client {client}'s secrets differ from results.json "
                   "secrets[].server_view beyond rounding: all_px0 must be enumerated on "
                   f"language_model(run, {client})")
    got = _as_dict(task, values, want, "server")
    everyone = _by_repeats(e, sec.repeats, np.ones(sec.size, dtype=bool))
    glob = _by_repeats(_results_exposure(results, None), sec.repeats, mine)
    for k in sorted(want):
        if close(got[k], want[k], 1e-9 * max(1.0, abs(want[k]))):
            continue
        if k > 0 and close(got[k], everyone[k], 1e-9) and not close(everyone[k], want[k], 1e-9):
            fail(task, f"repeats {k}: you averaged every client's secrets on client {client}'s "
                       f"model; the server's view of client {client} concerns ITS OWN secrets "
                       f"(lm0.secrets.client == {client}) and the references")
        if close(got[k], glob[k], 1e-9) and not close(glob[k], want[k], 1e-9):
            fail(task, f"repeats {k}: these are the GLOBAL model's numbers; use expo0, "
                       f"measured on client {client}'s model")
        fail(task, f"repeats {k}: your mean is {direction(got[k], want[k])}: average expo0 "
                   f"over client {client}'s secrets with k repeats (k = 0: the references)")
    lo = _by_repeats(low, sec.repeats, mine)
    hi = _by_repeats(high, sec.repeats, mine)
    if any(not (lo[k] - 1e-9 <= summary[k] <= hi[k] + 1e-9) for k in want if k > 0):
        fail(task, f"your means differ from results.json secrets_summary.clients[{client}] "
                   "beyond rounding: is all_px0 enumerated on client "
                   f"{client}'s model?")
    ok(task, f"client {client}'s model (the server's view): "
       + ", ".join(f"{'references' if k == 0 else f'x{k}'} {want[k]:.2f}" for k in sorted(want))
       + " bits")


# ---- Task 9.4: greedy extraction, GNQ ----------------------------------------------------------


def greedy(fn) -> None:
    """Task 9.4: ``fn(next_log_probs, prefix, alphabet, length)`` = greedy decoding over the
    alphabet (= :func:`fedaudit.secrets.beam_decode` with ``beam = 1``) on the toy table."""
    task = "9.4"
    require(fn, task)
    model = toy_model()
    for length in (4, 3):
        out = call(task, fn, model, np.array(TOY_PREFIX), np.array(TOY_ALPHABET), length)
        got = as_array(task, out, "decoded tokens", dtype_kind="iu")
        want = beam_decode(model, TOY_PREFIX, TOY_ALPHABET, length, beam=1)[0][0]
        if got.shape != (length,):
            fail(task, f"return the {length} decoded tokens as one 1-D array; got shape "
                       f"{got.shape}")
        if np.array_equal(got, want):
            continue
        for rule, message in _GREEDY_MISTAKES.items():
            if np.array_equal(got, _greedy_rule(model, TOY_PREFIX, TOY_ALPHABET, length, rule)):
                fail(task, message)
        if not np.isin(got, TOY_ALPHABET).all():
            fail(task, _GREEDY_MISTAKES["whole vocabulary"])
        fail(task, f"on a toy table (prefix {list(TOY_PREFIX)}, alphabet "
                   f"{list(TOY_ALPHABET)}) your decoder differs from greedy decoding: at each "
                   "step, the alphabet's most likely token after prefix + the tokens so far")
    ok(task, "greedy decoding right on the toy table (= beam_decode with beam=1)")


def extraction(decoded, models: dict, results: dict) -> None:
    """Task 9.4 (on the run): ``decoded[view]`` = the greedy decoding (as a string) on each
    model of ``models`` ("global" or a client number -> LanguageModel), and what it extracts
    agrees with results.json ``secrets[].extracted`` / ``server_view.extracted``."""
    task = "9.4"
    require(decoded, task)
    if not isinstance(decoded, dict) or set(decoded) != set(models):
        fail(task, f"make decoded a dict with one string per view: {list(models)}")
    lines = []
    for view, lm in models.items():
        sec = lm.secrets
        got = decoded[view]
        if not isinstance(got, str):
            fail(task, f"decoded[{view!r}]: a string (lm.decode(tokens)), got {type(got).__name__}")
        want = lm.decode(beam_decode(lm.next_log_probs, sec.prefix, sec.alphabet,
                                     sec.tokens.shape[1], beam=1)[0][0])
        if got != want:
            fail(task, f"decoded[{view!r}] differs from greedy decoding on that view's model "
                       f"({lm.name}): the toy table passed, so is it decoded with this view's "
                       "model, from lm.secrets.prefix over lm.secrets.alphabet?")
        texts = [sec.text(s, lm.vocab) for s in range(sec.size)]
        if view == "global":
            flags = [e["extracted"] for e in results["secrets"]]
            mine = sec.client >= 0
        else:
            flags = [bool(e["server_view"] and e["server_view"]["extracted"])
                     for e in results["secrets"]]
            mine = sec.client == int(view)
        found = {texts[s] for s in np.flatnonzero(mine) if texts[s] == got}
        reported = {texts[s] for s in np.flatnonzero(mine) if flags[s]}
        if found != reported:  # fedaudit's own consistency, not the student's
            fail(task, f"{lm.name}: results.json's extraction flags disagree with greedy "
                       "decoding (is canaries.beam 1 in this run?)")
        lines.append(f"{view}: {got}" + (" = a planted secret" if found else ""))
    ok(task, "greedy decoding on every view agrees with results.json (" + "; ".join(lines) + ")")


def gnq_vs_exposure(rho, results: dict) -> None:
    """Task 9.4 (GNQ): Spearman between the planted secrets' GNQ percentiles and their
    exposures on the global model = results.json ``secrets_summary.gnq_vs_exposure``."""
    task = "9.4"
    got = as_number(task, rho, "rho")
    rows = [e for e in results["secrets"] if e["client"] is not None
            and e["gnq_percentile"] is not None]
    g = np.array([e["gnq_percentile"] for e in rows])
    x = np.array([e["exposure"] for e in rows])
    want = float(spearmanr(g, x).statistic)
    if not close(got, want, EXACT_REL):
        hint = (" (its sign is reversed: is one column negated?)" if close(got, -want, EXACT_REL)
                else "")
        fail(task, f"your rho {got:.4f} is {direction(got, want)}{hint}: the PLANTED secrets "
                   "(client not None; the references have no GNQ), gnq_percentile against the "
                   "global model's exposure, scipy.stats.spearmanr")
    summary = results["secrets_summary"].get("gnq_vs_exposure", {})
    ok(task, f"Spearman(GNQ percentile, exposure) over {len(rows)} planted secrets = {want:.3f}"
       + (f" (p = {summary['pvalue']:.3f})" if "pvalue" in summary else ""))
