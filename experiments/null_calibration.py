"""Are the verdicts calibrated?  Null federations in the layouts fedaudit ships, each drawn
many times with a seed, judged by the very functions the runs use (issue 57, item 8a).

Under a null nothing leaks: membership scores are exchangeable between members and
non-members, a property classifier's scores do not depend on the property, a
reconstruction gains nothing over the data-free prior on average, a label guess reads no
update.  Per layout the table gives the share of draws whose verdict says "leaks" (the
false-leak rate, which must stay at or below 5 %: two-sided families count a leak on either
side, one-sided ones above chance only), the rule of the time before issue 57 on the same
draws (its "above chance", from DeLong's interval, a z interval, Clopper-Pearson against a
uniform random guess), and how often the 95 % interval holds the true value where that is
known (the AUC's 0.5, the gain's 0, the label difference's expectation, estimated once from
200,000 draws).

    python experiments/null_calibration.py [--draws N] [--only NAME ...] [--json FILE]

Prints a markdown table (docs/validation.md section 24).  Each layout draws from its own
seeded stream, so a layout's row does not depend on the others or on --only.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from attacks.label_leakage.baseline import LabelCase, data_free_guess  # noqa: E402
from attacks.label_leakage.family import pooled_labels  # noqa: E402
from attacks.label_leakage.registry import chance_hits  # noqa: E402
from attacks.property_inference.family import RULE as PROPERTY_RULE  # noqa: E402
from fedaudit.image_metrics.pooled import gain_verdict  # noqa: E402
from fedaudit.intervals import clopper_pearson, normal_interval  # noqa: E402
from fedaudit.metrics import MEMBERSHIP_RULE, auc_interval  # noqa: E402
from fedaudit.verdicts import LEAKS, LEAKS_INVERTED, auc_estimate, decide  # noqa: E402

#: MNIST's class frequencies over its 60,000 training digits (5923, 6742, 5958, 6131, 5842,
#: 5421, 5918, 6265, 5851, 5949): a prior that is not quite uniform
MNIST_PRIOR = np.array([5923, 6742, 5958, 6131, 5842, 5421, 5918, 6265, 5851, 5949]) / 60000
UNIFORM = np.full(10, 0.1)


@dataclass
class Draw:
    """One null draw judged: does the new verdict say leaks, did the old rule say above
    chance, does the new interval hold the truth (None where the truth is not known)."""

    leaks: bool
    old_leaks: bool
    covered: bool | None = None
    old_covered: bool | None = None


def _judged(s: np.ndarray, mem: np.ndarray, cl: np.ndarray | None, rule) -> Draw:
    """An AUC's draw judged: the verdict (either side), DeLong's old "above chance", and
    whether each interval holds 0.5."""
    est = auc_estimate(s, mem, cl)
    lo, hi = auc_interval(s, mem)
    ok = est.interval is not None and est.interval[0] <= 0.5 <= est.interval[1]
    return Draw(decide(rule, est).outcome in (LEAKS, LEAKS_INVERTED), lo > 0.5, ok,
                lo <= 0.5 <= hi)


# ---- membership: members and non-members exchangeable ---------------------------------
def membership(m: int, n: int) -> Callable[[np.random.Generator], Draw]:
    def draw(g):
        s = g.normal(size=m + n)
        return _judged(s, np.r_[np.ones(m), np.zeros(n)].astype(int), None, MEMBERSHIP_RULE)
    return draw


def server_view(k: int, m: int, spread: float) -> Callable[[np.random.Generator], Draw]:
    """k clients' models, each scoring its m members and m non-members; a client's model
    shifts all its scores (``spread``): the pooled AUC, clustered by client."""
    def draw(g):
        s = (spread * g.normal(size=(k, 1)) + g.normal(size=(k, 2 * m))).ravel()
        mem = np.tile(np.r_[np.ones(m), np.zeros(m)], k).astype(int)
        return _judged(s, mem, np.repeat(np.arange(k), 2 * m), MEMBERSHIP_RULE)
    return draw


# ---- property inference: 24 clients x 3 rounds, the property fixed per client -----------
def property_layout(k: int, rounds: int, with_property: int, noise: float
                    ) -> Callable[[np.random.Generator], Draw]:
    def draw(g):
        has = np.zeros(k, bool)
        has[g.choice(k, with_property, replace=False)] = True
        s = (g.normal(size=(k, 1)) + noise * g.normal(size=(k, rounds))).ravel()
        return _judged(s, np.repeat(has, rounds).astype(int), np.repeat(np.arange(k), rounds),
                       PROPERTY_RULE)
    return draw


# ---- reconstruction: SSIM gains over the prior, mean 0 ---------------------------------
def gains_layout(clients: int, images: int, rounds: int, skewed: bool = False
                 ) -> Callable[[np.random.Generator], Draw]:
    """Each image's gain: its own effect (sd 0.15; a centred gamma when ``skewed``) plus
    noise per round (sd 0.05): the same images attacked again at later rounds."""
    def draw(g):
        n = clients * images
        if skewed:
            effect = 0.15 * (g.gamma(1.0, size=n) - 1.0)
        else:
            effect = 0.15 * g.normal(size=n)
        gain = (effect[:, None] + 0.05 * g.normal(size=(n, rounds))).ravel()
        img = np.repeat(np.arange(n), rounds)
        cl = img // images
        v = gain_verdict(gain, cl, img)
        ci = v.headline.interval
        old = normal_interval(float(gain.mean()), float(gain.var(ddof=1)) / len(gain),
                              bounds=(-2.0, 2.0))
        return Draw(v.outcome == LEAKS, old[0] > 0.0,
                    None if ci is None else ci[0] <= 0.0 <= ci[1], old[0] <= 0.0 <= old[1])
    return draw


# ---- label leakage: a guess that reads no update ----------------------------------------
def _even(n: int, c: int, g: np.random.Generator, prior: np.ndarray) -> np.ndarray:
    out = np.full(c, n // c)
    out[: n % c] += 1
    return out


def _prior_draw(n, c, g, prior):
    return g.multinomial(n, prior)


def _one_class(n, c, g, prior):
    out = np.zeros(c, dtype=np.int64)
    out[int(np.argmax(prior))] = n
    return out


GUESSERS = {"even spread": _even, "random from the prior": _prior_draw,
            "all in the commonest class": _one_class}


def _labels_of(g, clients, batch, prior, alpha):
    """Each client's label counts: ``batch`` draws from the prior (IID), or from its own
    Dirichlet(alpha) mixture of the classes (non-IID) when ``alpha`` is given."""
    c = len(prior)
    if alpha is None:
        return [g.multinomial(batch, prior) for _ in range(clients)]
    return [g.multinomial(batch, g.dirichlet(alpha * c * prior)) for _ in range(clients)]


def labels_layout(clients: int, batch: int, rounds: int, guesser: str,
                  prior: np.ndarray = UNIFORM, alpha: float | None = None
                  ) -> tuple[Callable[[np.random.Generator], Draw], Callable[[], float]]:
    guess = GUESSERS[guesser]
    c = len(prior)

    def draw(g):
        true = _labels_of(g, clients, batch, prior, alpha)
        base = data_free_guess(batch, prior)
        cases = [LabelCase(k, guess(batch, c, g, prior), base, t)
                 for k, t in enumerate(true) for _ in range(rounds)]
        out = pooled_labels(cases, prior)
        hits = sum(int(np.minimum(cs.guess, cs.true).sum()) for cs in cases)
        n = sum(int(cs.true.sum()) for cs in cases)
        uniform_chance = sum(chance_hits(cs.true) for cs in cases) / n  # the old level
        truth = expected_difference()
        ci = out.get("difference_ci")
        return Draw(out["verdict"] == LEAKS, clopper_pearson(hits, n)[0] > uniform_chance,
                    None if ci is None else ci[0] - 1e-12 <= truth <= ci[1] + 1e-12)

    cache: dict[str, float] = {}

    def expected_difference() -> float:
        """E[(h - b) / n] of one update, from 200,000 seeded draws (the truth the
        clustered interval should hold)."""
        if "v" not in cache:
            g = np.random.default_rng(12345)
            base = data_free_guess(batch, prior)
            tot = 0.0
            for t in _labels_of(g, 200_000, batch, prior, alpha):
                gg = guess(batch, c, g, prior)
                tot += np.minimum(gg, t).sum() - np.minimum(base, t).sum()
            cache["v"] = tot / (200_000 * batch)
        return cache["v"]

    return draw, expected_difference


def layouts() -> dict[str, tuple[str, str, Callable, int]]:
    """name -> (unit, what, draw function, draws)."""
    out: dict[str, tuple[str, str, Callable, int]] = {}
    for m in (2, 3, 5, 16, 50):
        out[f"membership {m} vs {m}"] = ("sample", "AUC, independent samples",
                                         membership(m, m), 4000)
    out["curious server, 12 clients x (20 + 20)"] = (
        "client", "AUC over the clients' models, client effect sd 1", server_view(12, 20, 1.0),
        2000)
    out["curious server, 4 clients x (4 + 4)"] = (
        "client", "the digits matrix's layout", server_view(4, 4, 1.0), 2000)
    out["property, 24 clients x 3 rounds"] = (
        "client", "AUC over 72 updates, 10 clients with the property, round noise sd 1",
        property_layout(24, 3, 10, 1.0), 4000)
    out["property, 24 clients x 3 rounds, noise sd 0.3"] = (
        "client", "the same, rounds nearly equal", property_layout(24, 3, 10, 0.3), 4000)
    out["SSIM gain, 2 clients x 4 images x 3 rounds"] = (
        "client", "threat-matrix's two one-batch clients", gains_layout(2, 4, 3), 4000)
    out["SSIM gain, 8 clients x 1 image x 3 rounds"] = (
        "client", "8 images x 3 rounds, one image per client", gains_layout(8, 1, 3), 4000)
    out["SSIM gain, 8 clients x 1 image x 3 rounds, skewed"] = (
        "client", "image effects a centred gamma(1)", gains_layout(8, 1, 3, True), 4000)
    for batch in (4, 8, 32):
        for guesser in GUESSERS:
            draw, _ = labels_layout(8, batch, 3, guesser)
            out[f"labels, 8 clients x batch {batch} x 3 rounds, {guesser}"] = (
                "client", "IID from a uniform prior", draw, 1000)
    for guesser in GUESSERS:
        draw, _ = labels_layout(10, 500, 3, guesser)
        out[f"labels, 10 clients x 500 x 3 rounds, {guesser}"] = (
            "client", "IID from a uniform prior", draw, 1000)
    for guesser in ("even spread", "random from the prior"):
        draw, _ = labels_layout(8, 8, 3, guesser, MNIST_PRIOR)
        out[f"labels, 8 clients x batch 8 x 3 rounds, {guesser}, MNIST prior"] = (
            "client", "IID from MNIST's class prior", draw, 1000)
    for guesser in ("all in the commonest class", "random from the prior"):
        draw, _ = labels_layout(8, 8, 3, guesser, UNIFORM, alpha=0.5)
        out[f"labels, 8 clients x batch 8 x 3 rounds, {guesser}, non-IID"] = (
            "client", "each client Dirichlet(0.5) over the classes: the null's model fails",
            draw, 1000)
    return out


def _rate(k: int, n: int) -> str:
    lo, hi = clopper_pearson(k, n)
    return f"{100 * k / n:.1f} % [{100 * lo:.1f}, {100 * hi:.1f}]"


def run(name: str, unit: str, what: str, draw: Callable, draws: int, seed: int) -> dict:
    t0 = time.perf_counter()
    results = [draw(np.random.default_rng([seed, i])) for i in range(draws)]
    cov = [r.covered for r in results if r.covered is not None]
    old_cov = [r.old_covered for r in results if r.old_covered is not None]
    return {"layout": name, "unit": unit, "what": what, "draws": draws,
            "false_leaks": int(sum(r.leaks for r in results)),
            "old_false_leaks": int(sum(r.old_leaks for r in results)),
            "covered": int(sum(cov)), "coverage_draws": len(cov),
            "old_covered": int(sum(old_cov)), "old_coverage_draws": len(old_cov),
            "seconds": round(time.perf_counter() - t0, 1)}


def table(rows: list[dict]) -> str:
    out = ["| layout | unit | draws | false \"leaks\" [95% CI] | rule before issue 57 | "
           "coverage of the 95 % interval | before |",
           "|---|---|---|---|---|---|---|"]
    for r in rows:
        cov = (f"{100 * r['covered'] / r['coverage_draws']:.1f} %"
               if r["coverage_draws"] else "–")
        old = (f"{100 * r['old_covered'] / r['old_coverage_draws']:.1f} %"
               if r["old_coverage_draws"] else "–")
        out.append(f"| {r['layout']} | {r['unit']} | {r['draws']} | "
                   f"{_rate(r['false_leaks'], r['draws'])} | "
                   f"{100 * r['old_false_leaks'] / r['draws']:.1f} % | {cov} | {old} |")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--draws", type=int, default=None,
                   help="draws per layout (default: each layout's own, 1,000-4,000)")
    p.add_argument("--only", nargs="*", default=None, help="layouts whose name contains any")
    p.add_argument("--seed", type=int, default=57)
    p.add_argument("--json", type=Path, default=None, help="also write the rows here")
    args = p.parse_args(argv)
    rows = []
    for i, (name, (unit, what, draw, n)) in enumerate(layouts().items()):
        if args.only and not any(o in name for o in args.only):
            continue
        rows.append(run(name, unit, what, draw, args.draws or n, args.seed * 1000 + i))
        r = rows[-1]
        print(f"{name}: {r['false_leaks']}/{r['draws']} leaks (before: "
              f"{r['old_false_leaks']}), {r['seconds']} s", file=sys.stderr, flush=True)
    print(table(rows))
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
