# %% [markdown]
# # Lab 2 -- Membership inference by hand: the LOSS attack
#
# **Goal.** Write the simplest membership-inference attack yourself, against a black-box
# *oracle* on a federation's global model, and evaluate it the way the literature does:
# ROC curve, AUC and -- the number that matters -- the true-positive rate at a low
# false-positive rate (Carlini et al., "Membership Inference Attacks From First
# Principles", 2022).
#
# **You will:** (1) write the LOSS score (Yeom et al. 2018), (2) compute AUC and TPR at
# 1% FPR with scikit-learn, (3) check that your numbers are fedaudit's, (4) see why a
# decent AUC can still mean many false accusations.
#
# Each task ends with a `check` cell: run it; it prints `ok` or tells you what to fix.

# %%
import numpy as np
from sklearn.metrics import roc_auc_score, roc_curve

import fedaudit
from fedaudit.labs import TARGET, lab_run, load_target, todo
from fedaudit.labs.checks import loss_attack as check

# %% [markdown]
# ## The target federation
#
# `TARGET` is the `membership-signal` scenario (tiny clients, 30 local epochs: a federation
# that overfits) with a few overrides. `lab_run` is `fedaudit.run` with a cache: labs 1-5
# and 7 share this run, so it trains once, in whichever of them runs first (about half a
# minute).

# %%
print(TARGET)
run = lab_run(*TARGET)
print("test accuracy", run.results["model"]["test_accuracy"])
target = load_target(run)
print(target.oracle, "audit samples:", len(target.member), "members:", int(target.member.sum()),
      "non-members:", int((target.member == 0).sum()))

# %% [markdown]
# `target.oracle.predict_proba(x)` returns the model's softmax probabilities and nothing
# else: no weights, no gradients. `target.x, target.y, target.member` are the samples
# fedaudit attacked: every client's training samples (members, 1) and, for each client, as
# many holdout samples with the same labels (non-members, 0). The clients draw their
# non-members from one holdout pool, so some are drawn by several clients; the pooled set
# counts each sample once and therefore holds FEWER non-members than members (printed
# above).
#
# ## Task 2.1 -- the LOSS score
#
# A model fits its training samples better than unseen ones, so a member has a *lower*
# loss. The attack's score must be *higher* for members: use `-CE(p, y) = log p_y`, where
# `p_y` is the probability of the true label. Guard the log against `p_y = 0`.

# %%
def loss_scores(proba: np.ndarray, y: np.ndarray) -> np.ndarray:
    """log p_y for every row of ``proba`` (n, classes) and label ``y`` (n,)."""
    ### BEGIN SOLUTION
    p_y = proba[np.arange(len(y)), y]
    return np.log(np.maximum(p_y, 1e-30))
    ### STUB
    # TODO: pick each row's probability of its true label, return its log
    return todo("loss_scores: log of the probability of the true label")
    ### END SOLUTION


# %% check
check.loss_scores(loss_scores)

# %% [markdown]
# ## Task 2.2 -- ROC, AUC and TPR at 1% FPR
#
# Write `roc_summary(scores, member)` returning `(auc, tpr_at_1pct_fpr)` with
# `sklearn.metrics.roc_auc_score` and `roc_curve`. TPR at 1% FPR is the largest TPR among
# the ROC points whose FPR is at most 0.01 -- a point exactly at 1% counts -- and never an
# interpolation (a point between two thresholds is not an attack you can run). The check
# also runs your function on two hand-made cases: one where tied scores take the ROC
# curve across 1% FPR in one diagonal step, one with a ROC point exactly at 1% FPR.

# %%
def roc_summary(scores: np.ndarray, member: np.ndarray) -> tuple[float, float]:
    ### BEGIN SOLUTION
    auc = roc_auc_score(member, scores)
    fpr, tpr, _ = roc_curve(member, scores, drop_intermediate=False)
    return float(auc), float(tpr[fpr <= 0.01].max())
    ### STUB
    # TODO: roc_auc_score(y_true, y_score); roc_curve -> largest tpr with fpr <= 0.01
    return todo("roc_summary: (auc, tpr at 1% fpr)")
    ### END SOLUTION


# %% check
rng = np.random.default_rng(0)
toy_member = rng.integers(0, 2, 400)
toy_scores = toy_member + rng.normal(0, 1.0, 400)
check.roc_summary(roc_summary, toy_scores, toy_member)

# %% [markdown]
# ## Task 2.3 -- attack the federation
#
# Query the oracle on `target.x`, score with your `loss_scores`, and compute your AUC and
# TPR at 1% FPR. fedaudit ran the same attack on the same samples: both must match
# `run.results["attacks"]["loss"]`. The check also prints what random scores reach at 1%
# FPR on this audit set, for comparison.

# %%
### BEGIN SOLUTION
proba = target.oracle.predict_proba(target.x)
scores = loss_scores(proba, target.y)
my_auc, my_tpr = roc_summary(scores, target.member)
### STUB
scores = todo("scores of the target's audit samples")
my_auc, my_tpr = todo("your AUC on the target"), todo("your TPR at 1% FPR")
### END SOLUTION
print("mine:", my_auc, my_tpr)
print("fedaudit:", run.results["attacks"]["loss"])

# %% check
check.matches_fedaudit(my_auc, run.results, my_tpr)

# %% [markdown]
# ## Task 2.4 -- why low FPR matters
#
# Suppose the attacker runs the attack at the threshold that catches 80% of the members,
# against a population of 10,000 people who were *not* in the training data. How many of
# them does it wrongly flag as members? (`FPR at 80% TPR` x 10,000; compute it from the ROC
# curve of your scores.)

# %%
population = 10_000
### BEGIN SOLUTION
fpr, tpr, _ = roc_curve(target.member, scores, drop_intermediate=False)
false_accusations = float(fpr[tpr >= 0.8].min()) * population
### STUB
false_accusations = todo("FPR at 80% TPR times the population")
### END SOLUTION
print(false_accusations)

# %% check
check.false_accusations(false_accusations, scores, target.member, population)

# %% [markdown]
# ## Reflection
#
# 1. Your AUC is well above 0.5. Compare your TPR at 1% FPR with what random scores reach
#    (printed by the check of task 2.3). Which of the two numbers, AUC or TPR at 1% FPR,
#    tells you whether *one specific person* can be confidently identified as a member,
#    and what does this attack achieve by that measure?
# 2. How many non-members does the audit set hold? What is the smallest FPR it can
#    resolve (`results["attacks"]["loss"]["min_fpr_resolution"]`), and what does that mean
#    for "TPR at 0.1% FPR"?
# 3. Plot the ROC curve on log-log axes (`plt.loglog(fpr, tpr)`). Where does it leave the
#    diagonal?

# %% [markdown] answer
# *Possible answers.* (1) TPR at low FPR: AUC averages over all thresholds, including the
# many where most flagged people are non-members; a confident identification needs a
# threshold with almost no false positives. Here the LOSS attack's TPR at 1% FPR is no
# better than random scores (about 0.01 with a couple of hundred non-members, i.e. one or
# two false positives allowed): a decent AUC, and nobody confidently identified. LOSS
# ranks by how easy a sample is, and the easiest non-members are as confident as any
# member; per-sample calibration (LiRA, RMIA, FedMIA in lab 7) targets exactly this. (2) With n non-members the smallest non-zero
# FPR is 1/n; when 1/n > 0.001, "TPR at 0.1% FPR" is the TPR at FPR = 0. (3) On log-log
# axes the low-FPR region is visible; an attack that is only better than chance on average
# hugs the diagonal there.
