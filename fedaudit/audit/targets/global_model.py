"""``global``: the final global model -- the outsider, who queries the released model."""

from __future__ import annotations

from attacks.membership.registry import (ATTACKS, ReferenceNeeds, needs_references, reference_needs,
                              reference_summary)
from fedaudit.audit.targets.base import Target, TargetKind, needs_model_method, register_target


def reference_signals(ctx, methods: tuple[str, ...], quantizer: str | None = None):
    """The reference attacks' signals for a released model (None without references):
    each reference quantized like the release when ``quantizer`` is given, with what each
    reference attack of ``methods`` says it needs (:func:`attacks.membership.registry.reference_needs`:
    LiRA's augmented views, offline RMIA's tuning samples)."""
    if ctx.references is None:
        return None
    from fedaudit.audit.reference_models import reference_signals as signals

    needs = ReferenceNeeds.union(reference_needs(m, ctx.attack_options.get(m, {}))
                                 for m in methods if needs_references(m))
    return lambda ids: signals(ctx.references, ctx.data, ids, ctx.model(), ctx.device,
                               ctx.scenario.attack.batch_size, quantizer, needs=needs)


class ReleasedModel(TargetKind):
    """A released model (the final one, a quantized one): the attacks on released models
    run on it, the reference attacks included."""

    references = True

    def check(self, scenario):
        return needs_model_method(self, scenario)


@register_target
class GlobalModel(ReleasedModel):
    name = "global"
    describe = "the final global model (the outsider)"

    @property
    def writes(self) -> tuple[str, ...]:
        """``attacks``, each client's ``attacks`` and ``attack_set``, and in ``references``
        what the reference attacks report of themselves (``reference_summary``: RMIA's
        ``rmia_a``, ``rmia_a_tuned``)."""
        return ("attacks", "clients[].attacks", "clients[].attack_set",
                *(f"references.{m}_{k}" for m in ATTACKS for k in reference_summary(m)))

    def targets(self, ctx):
        methods = self.methods(ctx.scenario)
        return [Target("global", self.name, lambda: ctx.trajectory.final, methods,
                       references=reference_signals(ctx, methods))]

    def record(self, ctx, results):
        """results.json ``attacks`` (pooled), each client's ``attacks`` and
        ``attack_set``; in ``references`` the values the reference attacks report of
        themselves on this model (RMIA's ``a``: ``rmia_a``, ``rmia_a_tuned``)."""
        (res,) = results
        ctx.results["attacks"] = res.entries()
        if ctx.references is not None:
            for m, outcome in res.outcomes.items():
                for k in reference_summary(m):
                    if k in outcome.info:
                        ctx.results["references"][f"{m}_{k}"] = outcome.info[k]
        for c, client in enumerate(ctx.results["clients"]):
            s = ctx.sets[c]
            client["attacks"] = res.client_metrics(c)
            client["attack_set"] = {"members": int(len(s.members)),
                                    "nonmembers": int(len(s.nonmembers)),
                                    "label_mismatched_nonmembers": int(s.mismatched)}
        return list(res.rows)
