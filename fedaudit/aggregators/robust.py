"""Byzantine-robust rules: each reads every client's update, so none can run where the
server sees only their sum (``federation.aggregation = "secagg+"``).

* FedMedian, FedTrimmedAvg: the coordinate-wise median and ``beta``-trimmed mean of the
  clients' models (Yin et al. 2018, "Byzantine-Robust Distributed Learning: Towards
  Optimal Statistical Rates", ICML): per coordinate, the ``floor(beta n)`` smallest and
  largest values are dropped and the rest averaged.
* Krum, MultiKrum (Blanchard et al. 2017, "Machine Learning with Adversaries: Byzantine
  Tolerant Gradient Descent", NeurIPS): each model is scored by the sum of its squared
  distances to its ``n - f - 2`` nearest others (``f = num_malicious_nodes``); Krum keeps
  the lowest-scored model, MultiKrum averages the ``num_nodes_to_select`` lowest.  The
  guarantee needs ``n > 2f + 2``.
* Bulyan (El Mhamdi et al. 2018, "The Hidden Vulnerability of Distributed Learning in
  Byzantium", ICML): Krum selects ``theta = n - 2f`` models, then per coordinate the
  ``theta - 2f`` values nearest the median are averaged; it needs ``n >= 4f + 3``.

``n`` is the number of clients sampled per round (a round with failed clients has fewer).
"""

from __future__ import annotations

from fedaudit.aggregators.base import Aggregator, register_aggregator
from fedaudit.options import option


def _check_beta(value: float) -> str | None:
    return None if 0.0 <= value < 0.5 else "out of range, must be >= 0 and < 0.5"


MALICIOUS = option(int, 0, "f, the number of malicious clients the rule tolerates", min=0)


class _Robust(Aggregator):
    needs_each_update = True


def _sampled(scenario) -> int:
    return scenario.federation.sampled_clients()[1]


@register_aggregator
class FedMedian(_Robust):
    name = "FedMedian"
    describe = "the coordinate-wise median of the clients' models (Yin et al. 2018)"


@register_aggregator
class FedTrimmedAvg(_Robust):
    name = "FedTrimmedAvg"
    describe = ("the coordinate-wise mean after dropping the beta fraction of largest and "
                "of smallest values (Yin et al. 2018)")
    options = {"beta": option(float, 0.2, "fraction of values cut at each end of every "
                              "coordinate, in [0, 0.5)", check=_check_beta)}


class _KrumFamily(_Robust):
    def check(self, scenario, options):
        n, f = _sampled(scenario), options["num_malicious_nodes"]
        if f > 0 and n <= 2 * f + 2:
            return (f"federation.{self.name}.num_malicious_nodes = {f}: Krum's guarantee "
                    f"needs more than 2f + 2 = {2 * f + 2} clients per round, this scenario "
                    f"samples {n}; allowed: 0..{max(0, (n - 3) // 2)}")
        return None


@register_aggregator
class Krum(_KrumFamily):
    name = "Krum"
    describe = ("the one model with the smallest summed squared distance to its n - f - 2 "
                "nearest others (Blanchard et al. 2017)")
    options = {"num_malicious_nodes": MALICIOUS}


@register_aggregator
class MultiKrum(_KrumFamily):
    name = "MultiKrum"
    describe = "the mean of the num_nodes_to_select models Krum scores best (Blanchard et al. 2017)"
    options = {"num_malicious_nodes": MALICIOUS,
               "num_nodes_to_select": option(int, 1, "models averaged (1 = Krum)", min=1)}

    def check(self, scenario, options):
        n, k = _sampled(scenario), options["num_nodes_to_select"]
        if k > n:
            return (f"federation.MultiKrum.num_nodes_to_select = {k}: more than the {n} "
                    f"clients sampled per round; allowed: 1..{n}")
        return super().check(scenario, options)


@register_aggregator
class Bulyan(_Robust):
    name = "Bulyan"
    describe = ("Krum's selection of n - 2f models, then per coordinate the mean of the "
                "n - 4f values nearest their median (El Mhamdi et al. 2018)")
    options = {"num_malicious_nodes": MALICIOUS}

    def check(self, scenario, options):
        n, f = _sampled(scenario), options["num_malicious_nodes"]
        if n < 3:
            return (f"federation.strategy = 'Bulyan' needs at least 3 clients per round; "
                    f"this scenario samples {n} (federation.num_clients, fraction_train)")
        if n < 4 * f + 3:
            return (f"federation.Bulyan.num_malicious_nodes = {f}: Bulyan needs at least "
                    f"4f + 3 = {4 * f + 3} clients per round, this scenario samples {n}; "
                    f"allowed: 0..{(n - 3) // 4}")
        return None
