"""``global``: the final global model -- the outsider, who queries the released model."""

from __future__ import annotations

from fedaudit.audit.targets.base import Target, TargetKind, needs_model_method, register_target


def reference_signals(ctx, quantizer: str | None = None):
    """The reference attacks' signals for a released model (None without references):
    each reference quantized like the release when ``quantizer`` is given."""
    if ctx.references is None:
        return None
    from fedaudit.audit.references import reference_signals as signals

    opts = ctx.attack_options
    methods = ctx.scenario.attack.methods
    augment = opts.get("lira", {}).get("augment", "none") if "lira" in methods else "none"
    tune = "rmia" in methods and opts.get("rmia", {}).get("a", "auto") == "auto"
    return lambda ids: signals(ctx.references, ctx.data, ids, ctx.model(), ctx.device,
                               ctx.scenario.attack.batch_size, quantizer, augment=augment,
                               tune=tune)


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
        rmia = res.pooled.get("rmia", {})
        if "a" in rmia and "references" in ctx.results:  # the a RMIA used on this model
            ctx.results["references"]["rmia_a"] = rmia["a"]
            ctx.results["references"]["rmia_a_tuned"] = rmia["a_tuned"]
        for c, client in enumerate(ctx.results["clients"]):
            s = ctx.sets[c]
            client["attacks"] = res.clients[c]
            client["attack_set"] = {"members": int(len(s.members)),
                                    "nonmembers": int(len(s.nonmembers)),
                                    "label_mismatched_nonmembers": int(s.mismatched)}
        return res.rows
