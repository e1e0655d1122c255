# %% [markdown]
# # Lab 5 -- Gradient uniqueness: planting canaries and finding them
#
# **Goal.** Gradient Uniqueness (GNQ; Abdelghafar, Aliakbarpour, Jermaine, arXiv
# 2510.10902; docs/algorithms.md section 1) measures how much a sample's gradient stands
# out from the others of its batch: `GNQ_j = g_j^T (sum_{k != j} g_k g_k^T + lam I)^{-1} g_j`.
# A sample the rest of the data does not "explain" -- an outlier, a mislabeled point -- has
# a large GNQ, and is a natural suspect for memorisation. fedaudit computes GNQ for every
# training sample on the clients, during training.
#
# To test an auditing tool, plant something you know: the shared federation has five
# *canaries*, mislabeled digits, in client 0. **You will:** (1) average GNQ per sample and
# rank the canaries, (2) check whether the top-GNQ samples are the canaries, (3) ask
# whether GNQ points where the membership attack hits.

# %%
import numpy as np
from scipy.stats import percentileofscore, spearmanr

from fedaudit.labs import TARGET, lab_run, todo
from fedaudit.labs.checks import gnq as check

run = lab_run(*TARGET)  # the shared federation (canaries in client 0, client-side GNQ)
with np.load(run.dir / "gnq_samples.npz") as npz:
    gnq = {k: npz[k] for k in npz.files}
print({k: v.shape for k, v in gnq.items()})
print("canaries:", np.unique(gnq["sample_id"][gnq["canary"]]))

# %% [markdown]
# `gnq_samples.npz` has one row each time a sample was scored (every local epoch of every
# round): `sample_id, client, round, epoch, score, canary`.
#
# ## Task 5.1 -- mean GNQ per sample, and the canaries' ranks
#
# Write `mean_gnq(sample_id, score)` returning the sorted distinct ids and each one's mean
# score. Then, within client 0 only, compute each canary's percentile rank among the
# client's samples (`scipy.stats.percentileofscore(means, m, kind="weak")`; 100 = the most
# unique sample).

# %%
def mean_gnq(sample_id: np.ndarray, score: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    ### BEGIN SOLUTION
    ids, inv = np.unique(sample_id, return_inverse=True)
    return ids, np.bincount(inv, weights=score) / np.bincount(inv)
    ### STUB
    # TODO: np.unique(sample_id, return_inverse=True), then np.bincount with weights=score
    return todo("mean_gnq: (distinct ids, mean score of each)")
    ### END SOLUTION


# %% check
check.mean_gnq(mean_gnq, gnq)

# %%
mask = gnq["client"] == 0
ids0, means0 = mean_gnq(gnq["sample_id"][mask], gnq["score"][mask])
canaries = np.unique(gnq["sample_id"][mask & gnq["canary"]])
### BEGIN SOLUTION
percentiles = {int(c): percentileofscore(means0, means0[ids0 == c][0], kind="weak")
               for c in canaries}
### STUB
percentiles = todo("{canary id: percentile of its mean GNQ within client 0}")
### END SOLUTION
print(percentiles)

# %% check
check.canary_percentiles(percentiles, run.results)

# %% [markdown]
# ## Task 5.2 -- does GNQ find them?
#
# Take client 0's 5 samples with the highest mean GNQ. How many are canaries?

# %%
k = 5
### BEGIN SOLUTION
top = ids0[np.argsort(-means0, kind="stable")[:k]]
hits = int(np.isin(top, canaries).sum())
### STUB
hits = todo("number of canaries among the top-k samples by mean GNQ")
### END SOLUTION
print(hits)

# %% check
check.top_k_hits(hits, gnq, client=0, k=k)

# %% [markdown]
# ## Task 5.3 -- does GNQ point where the attack hits?
#
# `run.scores()` holds every attack score. Take the LOSS scores of the *members* on the
# global model, match each member to its mean GNQ (over all clients) by `sample_id`, and
# compute the Spearman correlation.

# %%
scores = run.scores(as_frame=False)
ids_all, means_all = mean_gnq(gnq["sample_id"], gnq["score"])
### BEGIN SOLUTION
keep = (scores["target"] == "global") & (scores["method"] == "loss") & (scores["member"] == 1)
sid, loss = scores["sample_id"][keep], scores["score"][keep]
has = np.isin(sid, ids_all)
rho = spearmanr(means_all[np.searchsorted(ids_all, sid[has])], loss[has]).statistic
### STUB
rho = todo("Spearman(mean GNQ, LOSS score) over the members")
### END SOLUTION
print(rho)

# %% check
check.gnq_vs_attack(rho, gnq, scores)

# %% [markdown]
# ## Reflection
#
# 1. The canaries rank near the top of their client: GNQ finds samples that stand out.
#    Are they also the samples the LOSS attack flags most easily? Look at their LOSS scores.
# 2. Is the correlation in Task 5.3 positive or negative? Why could a sample with a unique
#    gradient have a *low* LOSS score (a high loss) at the end of training? (Think of a
#    mislabeled or atypical sample the model never manages to fit.)
# 3. `run.results["gnq_vs_attack"]` relates GNQ to Res-MIA per client and per sample. What
#    does it say here, and would you trust it with 8 clients?

# %% [markdown] answer
# *Possible answers.* (1) Not necessarily: a mislabeled canary is hard to fit, so its loss
# stays high and the LOSS attack scores it as a non-member even though its gradient was
# unique (and its influence on the model large). (2) Negative here (about -0.45 with
# the shared federation): high GNQ marks samples whose gradient
# the others do not explain -- often atypical or mislabeled -- which keep a high loss; the
# attack scores typical, well-fitted samples as members. GNQ and loss-based attacks measure
# different things: uniqueness of influence versus fit. (3) The per-client Spearman over 8
# clients has a wide confidence interval; a p-value is reported next to it.
