# %% [markdown]
# # Lab 6 -- Defenses: DP-SGD, update clipping, quantization
#
# **Goal.** Compare three ways of making a federation leak less, by what they cost in
# accuracy and what they buy against the LOSS attack: local **DP-SGD** (per-sample clipping
# plus Gaussian noise, with an accountant that gives epsilon), **update clipping** at the
# server (no noise, no epsilon), and **post-training quantization** of the released model,
# scored by the attack-free indicator **r_Qn** (arXiv 2502.06567; larger = more secure).
#
# The four federations below use the `defense-*` scenarios (digits, 5 clients of ~50
# samples, an MLP trained with plain SGD), shortened to 4 rounds of 5 local epochs so the
# lab runs in minutes: about half a minute per run on 2 cores.

# %%
import math

import numpy as np
from scipy.stats import spearmanr

from fedaudit.labs import lab_run, todo
from fedaudit.labs.checks import defenses as check

short = ["federation.rounds=4", "train.local_epochs=5", "attack.methods=['loss']"]
no_quant = ["audit.quantization.enabled=false"]
runs = {
    "none": lab_run("defense-none", [*short, "attack.targets=['global','quantized']"]),
    "dp-sgd noise 0.5": lab_run("defense-dpsgd", [*short, *no_quant, "defense.noise_multiplier=0.5"]),
    "dp-sgd noise 2": lab_run("defense-dpsgd", [*short, *no_quant, "defense.noise_multiplier=2.0"]),
    "update clipping": lab_run("defense-clip", [*short, *no_quant]),
}
for name, r in runs.items():
    print(f"{name:18s}", r.results["defense"]["accounting"][:100])

# %% [markdown]
# ## Task 6.1 -- one row per defense
#
# For each run, a dict with `epsilon` (`results["defense"]["epsilon"]`: a number, `None`
# without a defense, the string `"inf"` without noise -- store `math.inf` for both),
# `accuracy` (final test accuracy) and the pooled LOSS attack's `auc` and
# `tpr_at_1pct_fpr`.

# %%
def summarise(results: dict) -> dict:
    ### BEGIN SOLUTION
    eps = results["defense"]["epsilon"]
    return {"epsilon": math.inf if eps in (None, "inf") else float(eps),
            "accuracy": results["model"]["test_accuracy"],
            "auc": results["attacks"]["loss"]["auc"],
            "tpr_at_1pct_fpr": results["attacks"]["loss"]["tpr_at_1pct_fpr"]}
    ### STUB
    # TODO: epsilon (math.inf for None / "inf"), accuracy, auc, tpr_at_1pct_fpr
    return todo("summarise: a dict with epsilon, accuracy, auc, tpr_at_1pct_fpr")
    ### END SOLUTION


rows = {name: summarise(r.results) for name, r in runs.items()}
for name, row in rows.items():
    print(f"{name:18s}", row)

# %% check
check.summary_rows(rows, runs)

# %% [markdown]
# ## Task 6.2 -- what does epsilon promise?
#
# An (epsilon, delta)-DP training procedure bounds *every* membership attack: at any
# false-positive rate, `TPR <= e^epsilon * FPR + delta` (and a TPR is at most 1) -- the
# hypothesis-testing view of DP (Kairouz, Oh, Viswanath 2015). Write the bound, evaluate it
# at FPR = 1% for both DP-SGD runs, and find the largest epsilon for which the bound at
# FPR = 1% is still at most 0.5.

# %%
def bound(epsilon: float, delta: float, fpr: float) -> float:
    ### BEGIN SOLUTION
    if math.isinf(epsilon):
        return 1.0
    return min(1.0, math.exp(epsilon) * fpr + delta)
    ### STUB
    # TODO: min(1, e^epsilon * fpr + delta)
    return todo("bound: the largest TPR at this FPR under (epsilon, delta)-DP")
    ### END SOLUTION


# %% check
check.dp_bound(bound)

# %%
delta = runs["dp-sgd noise 2"].results["defense"]["delta"]
for name in ("dp-sgd noise 0.5", "dp-sgd noise 2"):
    row = rows[name]
    print(f"{name}: epsilon {row['epsilon']:.1f}, bound at 1% FPR {bound(row['epsilon'], delta, 0.01):.3f},"
          f" measured TPR {row['tpr_at_1pct_fpr']:.3f}")
### BEGIN SOLUTION
eps_star = math.log((0.5 - delta) / 0.01)
### STUB
eps_star = todo("solve e^eps * 0.01 + delta = 0.5 for eps")
### END SOLUTION
print("epsilon* =", eps_star)

# %% check
check.meaningful_epsilon(eps_star, delta)

# %% [markdown]
# ## Task 6.3 -- quantization as a defense
#
# The `none` run also quantized its final model with five quantizers and attacked each
# release. Build `rows_q = [(quantizer, r_Qn, LOSS AUC), ...]` in the order of
# `results["quantization"]` (r_Qn may be the string `"inf"`: store `math.inf`) and the
# Spearman correlation between r_Qn and AUC. The r_Qn paper claims a *negative* one.

# %%
quant = runs["none"].results["quantization"]
### BEGIN SOLUTION
rows_q = [(q["quantizer"], math.inf if q["rqn"] == "inf" else q["rqn"],
           q["attacks"]["loss"]["auc"]) for q in quant]
rho = spearmanr([r[1] for r in rows_q], [r[2] for r in rows_q]).statistic
### STUB
rows_q = todo("[(quantizer, rqn, auc), ...]")
rho = todo("Spearman(r_Qn, AUC)")
### END SOLUTION
for q, row in zip(quant, rows_q if isinstance(rows_q, list) else []):
    print(row, "bits", q["bits"], "accuracy", q["test_accuracy"])

# %% check
check.quantization_table((rows_q, rho), runs["none"].results)

# %% [markdown]
# ## Reflection
#
# 1. Plot accuracy against AUC for the four runs. Which defense buys the most privacy per
#    point of accuracy here?
# 2. The DP-SGD epsilons are large. Is the bound of Task 6.2 meaningful for them? What does
#    the measured TPR tell you that epsilon does not (and the reverse)?
# 3. Update clipping has no epsilon at all. Why might it still lower the attack's AUC?
# 4. With 5 quantizers, how much can a Spearman correlation prove? What would you run to
#    test the r_Qn claim properly (`fedaudit sweep`, the `quantization-sweep` scenario)?
# 5. The full curve: `fedaudit sweep defense-dpsgd --grid defense.noise_multiplier=0,0.5,1,2`
#    (10 rounds of 20 epochs, several minutes). Try it at home.

# %% [markdown] answer
# *Possible answers.* (1) Compare the accuracy lost with the AUC gained towards 0.5; at
# these sizes DP-SGD with noise 2 reaches chance-level AUC but costs most of the accuracy.
# (2) For epsilon above about 4 the bound at 1% FPR exceeds 0.5 and soon 1: it promises
# nothing at that operating point; the measured TPR is one attack's lower bound on leakage,
# epsilon an upper bound for every attack -- a large gap between them is normal. (3)
# Clipping bounds each client's influence per round and slows fitting, which narrows the
# generalisation gap. (4) Very little: with n = 5 only |rho| = 1 is significant at 5%
# (two-sided); repeat over seeds and more quantizers.
