"""``global``: the final global model -- the outsider, who queries the released model."""

from __future__ import annotations

from fedaudit.audit.targets.base import Target, TargetKind, needs_model_method, register_target


def reference_signals(ctx, quantizer: str | None = None):
    """The reference attacks' signals for a released model (None without references):
    each reference quantized like the release when ``quantizer`` is given."""
    if ctx.references is None:
        return None
    from fedaudit.audit.references import reference_signals as signals

    return lambda ids: signals(ctx.references, ctx.data, ids, ctx.model(), ctx.device,
                               ctx.scenario.attack.batch_size, quantizer)


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

    def targets(self, ctx):
        return [Target("global", self.name, lambda: ctx.trajectory.final,
                       self.methods(ctx.scenario), references=reference_signals(ctx))]

    def record(self, ctx, results):
        """results.json ``attacks`` (pooled) and each client's ``attacks`` and
        ``attack_set``."""
        (res,) = results
        ctx.results["attacks"] = res.pooled
        for c, client in enumerate(ctx.results["clients"]):
            s = ctx.sets[c]
            client["attacks"] = res.clients[c]
            client["attack_set"] = {"members": int(len(s.members)),
                                    "nonmembers": int(len(s.nonmembers)),
                                    "label_mismatched_nonmembers": int(s.mismatched)}
        return res.rows
