"""A verdict from estimates: the four outcomes, what each family is judged against (its
:class:`Rule`), one tested figure (:class:`Estimate`) and the rule that turns the
estimates a cell looked at into its :class:`Verdict` (:func:`decide`).

The rule (docs/algorithms.md section 5):

1. **leaks** -- some estimate's one-sided test against the chance level rejects at
   ``alpha = (1 - LEVEL) / 2 = 0.025`` after Holm's correction over every estimate looked at
   (the headline, each other attack when the headline is the best of several, each client
   when the family has per-client figures).  For a two-sided family (an AUC), a test that
   rejects below chance is **leaks (inverted score)**: the attack's score, flipped, tells
   members from non-members.
2. **no leak beyond delta** -- no test rejects, and every estimate's interval (the
   headline's and each other's) lies within ``chance +- delta`` (a one-sided family: its
   upper bound at most ``chance + delta``): two one-sided tests at 2.5 % each, an
   equivalence test; every estimate's own (an intersection-union test needs no
   correction).  An estimate without an interval cannot show this, and keeps the cell
   inconclusive.
3. **inconclusive** -- neither: the verdict says which estimate blocks and about how many
   more units would resolve it (:func:`units_needed`).

"Not distinguishable from chance" is never safe: only rule 2 is.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from fedaudit.intervals import LEVEL
from fedaudit.verdicts.multiplicity import holm

__all__ = ["ALPHA", "INCONCLUSIVE", "LEAKS", "LEAKS_INVERTED", "NO_LEAK", "OUTCOMES",
           "Estimate", "Rule", "Verdict", "decide", "leak_flags", "legacy_outcome",
           "units_needed", "with_scope"]

LEAKS = "leaks"
LEAKS_INVERTED = "leaks (inverted score)"
NO_LEAK = "no leak beyond delta"
INCONCLUSIVE = "inconclusive"
OUTCOMES = (LEAKS, LEAKS_INVERTED, NO_LEAK, INCONCLUSIVE)
#: each one-sided test's level: an interval of level LEVEL excludes chance on one side
ALPHA = (1.0 - LEVEL) / 2

#: the verdict words of runs made before the four outcomes (fedaudit.intervals, 3a50a12):
#: "above chance" was a leak by the test of the time; nothing else was a claim of safety
_LEGACY = {"above chance": LEAKS, "below chance": INCONCLUSIVE,
           "not distinguishable from chance": INCONCLUSIVE}


def legacy_outcome(word: Any) -> str | None:
    """The outcome a stored verdict word stands for: itself when it is one of
    :data:`OUTCOMES`, the old chance words read conservatively (above -> leaks, anything
    else -> inconclusive), None for anything else."""
    if word in OUTCOMES:
        return word
    return _LEGACY.get(word) if isinstance(word, str) else None


@dataclass(frozen=True)
class Rule:
    """What a family's figures are judged against: ``delta``, the largest departure from
    chance called no leak (AUC 0.05, share of labels 0.05, SSIM gain 0.05);
    ``two_sided``: a figure significantly below chance is a leak too (an AUC below 0.5 is
    a score that works flipped); ``figure``: what the figure is, in words."""

    delta: float
    two_sided: bool
    figure: str

    def __post_init__(self) -> None:
        if not (isinstance(self.delta, (int, float)) and self.delta > 0):
            raise ValueError(f"delta = {self.delta!r}: must be > 0")


@dataclass(frozen=True)
class Estimate:
    """One figure tested against its chance level: the ``figure``, its ``interval`` (of
    level :data:`~fedaudit.intervals.LEVEL`; None when none can be computed), the
    one-sided p-values of ``figure > chance`` (``p_above``) and ``figure < chance``
    (``p_below``; None when no test was possible), the test's ``method``, its ``unit`` of
    independence and how many of them (``units``); ``scope`` names whose figure it is
    ("pooled", "client 3") and ``attack`` the attack (when a cell looks at several)."""

    figure: float
    interval: tuple[float, float] | None
    chance: float
    p_above: float | None
    p_below: float | None
    method: str
    unit: str
    units: int
    scope: str = "pooled"
    attack: str = ""

    def __post_init__(self) -> None:
        for name in ("p_above", "p_below"):
            p = getattr(self, name)
            if p is not None and not 0.0 <= p <= 1.0:
                raise ValueError(f"{name} = {p!r}: must lie in [0, 1]")
        if self.interval is not None and not self.interval[0] <= self.interval[1]:
            raise ValueError(f"interval = {self.interval!r}: needs low <= high")

    def p_leak(self, two_sided: bool) -> float | None:
        """The p-value of a leak: ``p_above`` (one-sided families), the smaller of the
        two (two-sided: each side tested at :data:`ALPHA`, so the smaller counts once)."""
        if self.p_above is None:
            return None
        return min(self.p_above, self.p_below) if two_sided and self.p_below is not None \
            else self.p_above

    def within(self, rule: Rule) -> bool:
        """Whether the interval lies within ``chance +- delta`` (one-sided: below
        ``chance + delta``); False without an interval."""
        if self.interval is None:
            return False
        lo, hi = self.interval
        # a hair of float slack: an interval computed at chance + delta exactly is within
        eps = 1e-12
        return hi <= self.chance + rule.delta + eps and (
            not rule.two_sided or lo >= self.chance - rule.delta - eps)

    def where(self) -> str:
        return f"{self.scope}" + (f", {self.attack}" if self.attack else "")

    def as_dict(self) -> dict[str, Any]:
        return {"scope": self.scope, "attack": self.attack or None, "figure": self.figure,
                "interval": None if self.interval is None else list(self.interval),
                "chance": self.chance, "p_above": self.p_above, "p_below": self.p_below,
                "method": self.method, "unit": self.unit, "units": self.units}


def units_needed(est: Estimate, rule: Rule) -> int | None:
    """About how many units would resolve an inconclusive ``est`` if its figure stayed
    where it is and its interval's half-width fell as ``1 / sqrt(units)``: the half-width
    must fall below ``|figure - chance|`` (to show a leak) or below ``delta - |figure -
    chance|`` (to show none), whichever asks for fewer units.  None without an interval
    (or a zero-width one)."""
    if est.interval is None or est.units < 1:
        return None
    half = (est.interval[1] - est.interval[0]) / 2
    if half <= 0:
        return None
    gap = abs(est.figure - est.chance)
    target = max(gap, rule.delta - gap)
    if target <= 0:
        return None
    return max(est.units + 1, math.ceil(est.units * (half / target) ** 2))


@dataclass(frozen=True)
class Verdict:
    """A cell's verdict (module docstring): the ``outcome``, the ``rule`` it was judged by,
    the ``headline`` estimate (the figure the cell shows) and every estimate looked at
    (``estimates``, the headline first) with their Holm-adjusted leak p-values
    (``adjusted``); ``deciding``: the index of the estimate that decided a leak, or that
    blocks "no leak" when inconclusive (None when no leak is shown); ``needed``: about how
    many units that estimate needs to resolve (inconclusive only)."""

    outcome: str
    rule: Rule
    estimates: tuple[Estimate, ...]
    adjusted: tuple[float | None, ...]
    deciding: int | None
    needed: int | None = None

    @property
    def headline(self) -> Estimate:
        return self.estimates[0]

    @property
    def leaking(self) -> tuple[Estimate, ...]:
        """The estimates whose test rejects after the correction."""
        return tuple(e for e, p in zip(self.estimates, self.adjusted)
                     if p is not None and p < ALPHA)

    def clients(self) -> list[Estimate]:
        return [e for e in self.estimates if e.scope.startswith("client")]

    def worst_client(self) -> Estimate | None:
        """The most exposed client: the smallest adjusted leak p among the per-client
        estimates (ties: the larger figure), None when the cell has none."""
        per = [(p if p is not None else 2.0, -e.figure, i)
               for i, (e, p) in enumerate(zip(self.estimates, self.adjusted))
               if e.scope.startswith("client")]
        return self.estimates[min(per)[2]] if per else None

    def summary(self) -> str:
        """The verdict in a short phrase for a table cell: ``leaks (client 0, p = 0.003
        after Holm over 13)``, ``no leak beyond 0.05``, ``inconclusive: client 0 needs about
        120 samples (has 8)``."""
        h = len(self.estimates)
        corrected = f" after Holm over {h}" if h > 1 else ""
        if self.outcome in (LEAKS, LEAKS_INVERTED):
            e, p = self.estimates[self.deciding], self.adjusted[self.deciding]
            where = "" if self.deciding == 0 else f" ({e.where()})"
            return f"{self.outcome}{where}, p = {_p(p)}{corrected}"
        if self.outcome == NO_LEAK:
            return f"{NO_LEAK} {self.rule.delta:g}"
        if self.deciding is None:
            return INCONCLUSIVE
        e = self.estimates[self.deciding]
        who = "" if self.deciding == 0 and e.scope == "pooled" else f"{e.where()}: "
        if e.interval is None:
            return f"{INCONCLUSIVE} ({who}no interval from {e.units} {e.unit}(s))"
        if self.needed is None:
            return f"{INCONCLUSIVE} ({who.rstrip(': ')})" if who else INCONCLUSIVE
        return (f"{INCONCLUSIVE} ({who}about {self.needed} {e.unit}s would resolve it, "
                f"{e.units} now)")

    def as_dict(self) -> dict[str, Any]:
        """The results.json / matrix.json form."""
        worst = self.worst_client()
        clients = self.clients()
        return {"outcome": self.outcome, "delta": self.rule.delta,
                "two_sided": self.rule.two_sided, "summary": self.summary(),
                "unit": self.headline.unit, "units": self.headline.units,
                "method": self.headline.method, "tests": len(self.estimates),
                "deciding": (None if self.deciding is None
                             else {**self.estimates[self.deciding].as_dict(),
                                   "p_adjusted": self.adjusted[self.deciding]}),
                "needed": self.needed,
                "clients": len({c.scope for c in clients}) or None,
                "leaking_clients": (len({e.scope for e in self.leaking
                                         if e.scope.startswith("client")})
                                    if clients else None),
                "worst_client": (None if worst is None else
                                 {**worst.as_dict(), "p_adjusted":
                                  self.adjusted[self.estimates.index(worst)]})}


def _p(p: float | None) -> str:
    if p is None:
        return "–"
    return f"{p:.2g}" if p >= 1e-3 else f"{p:.1e}"


def decide(rule: Rule, headline: Estimate, others: Sequence[Estimate] = ()) -> Verdict:
    """The :class:`Verdict` on ``headline`` and the ``others`` looked at beside it (module
    docstring).  ``headline`` is what the cell shows: the pooled figure (the best of
    several attacks counts every attack's pooled estimate among ``others``)."""
    estimates = (headline, *others)
    raw = [e.p_leak(rule.two_sided) for e in estimates]
    adjusted = holm(raw)
    rejected = [i for i, p in enumerate(adjusted) if p is not None and p < ALPHA]
    if rejected:
        i = min(rejected, key=lambda j: (adjusted[j], -abs(estimates[j].figure
                                                           - estimates[j].chance)))
        e = estimates[i]
        inverted = rule.two_sided and e.p_below is not None and e.p_below < (e.p_above or 1.0)
        return Verdict(LEAKS_INVERTED if inverted else LEAKS, rule, estimates,
                       tuple(adjusted), i)
    if all(e.within(rule) for e in estimates):  # False for an estimate without interval
        return Verdict(NO_LEAK, rule, estimates, tuple(adjusted), None)
    # inconclusive: an estimate without an interval blocks first (the headline before the
    # others), else the blocking estimate that needs the most units (relative to its own)
    bare = [i for i, e in enumerate(estimates) if e.interval is None]
    if bare:
        return Verdict(INCONCLUSIVE, rule, estimates, tuple(adjusted), bare[0])
    with_interval = list(range(len(estimates)))
    blocking = [i for i in with_interval if not estimates[i].within(rule)]
    needs = {i: units_needed(estimates[i], rule) for i in blocking}
    i = max(blocking, key=lambda j: ((needs[j] or math.inf) / max(estimates[j].units, 1),
                                     -j))
    return Verdict(INCONCLUSIVE, rule, estimates, tuple(adjusted), i, needs[i])


def leak_flags(rule: Rule, estimates: Sequence[Estimate | None]) -> list[str | None]:
    """Each estimate's leak when all of them are looked at (Holm over the ones that have a
    test): :data:`LEAKS`, :data:`LEAKS_INVERTED` or None (no leak shown; no estimate) --
    what a per-client table shades."""
    raw = [None if e is None else e.p_leak(rule.two_sided) for e in estimates]
    out: list[str | None] = []
    for e, p in zip(estimates, holm(raw)):
        if e is None or p is None or p >= ALPHA:
            out.append(None)
        else:
            inverted = rule.two_sided and e.p_below is not None and e.p_below < (e.p_above or 1.0)
            out.append(LEAKS_INVERTED if inverted else LEAKS)
    return out


def with_scope(est: Estimate, scope: str, attack: str = "") -> Estimate:
    """``est`` as the figure of ``scope`` (and ``attack``)."""
    return replace(est, scope=scope, attack=attack or est.attack)
