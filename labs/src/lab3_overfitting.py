# %% [markdown]
# # Lab 3 -- Overfitting and leakage
#
# **Goal.** Membership inference works because a model treats its training samples
# differently from unseen ones. Here you measure that difference -- the *generalisation
# gap* -- per client, and ask whether the clients with the largest gap are the ones the
# LOSS attack exposes most; then you change the number of local epochs and watch both move.
#
# **You will:** (1) compute a generalisation gap, (2) correlate gap and client size with
# the per-client attack AUC, (3) compare 30 local epochs with 2.

# %%
import numpy as np
from scipy.stats import spearmanr

from fedaudit.labs import TARGET, lab_run, load_target, todo
from fedaudit.labs.checks import overfitting as check

run = lab_run(*TARGET)  # the shared federation of labs 1-5 (cached)
target = load_target(run)
data, oracle = target.data, target.oracle
print("clients' sizes:", [c["num_examples"] for c in run.results["clients"]])
print("per-client LOSS AUC:", [round(c["attacks"]["loss"]["auc"], 3) for c in run.results["clients"]])

# %% [markdown]
# ## Task 3.1 -- the generalisation gap
#
# `generalisation_gap(oracle, data, ids)`: the global model's accuracy on the samples
# `ids` minus its accuracy on the test split `data.test`.

# %%
def generalisation_gap(oracle, data, ids: np.ndarray) -> float:
    ### BEGIN SOLUTION
    def acc(i):
        return float(np.mean(oracle.predict_proba(data.x[i]).argmax(axis=1) == data.y[i]))

    return acc(ids) - acc(data.test)
    ### STUB
    # TODO: accuracy on data.x[ids] (labels data.y[ids]) minus accuracy on data.test
    return todo("generalisation_gap: train accuracy minus test accuracy")
    ### END SOLUTION


# %% check
check.generalisation_gap(generalisation_gap, oracle, data)

# %% [markdown]
# ## Task 3.2 -- which clients leak most?
#
# For every client, its gap (on its own samples, `data.clients[c]`). Then the Spearman rank
# correlation between the clients' gaps and their LOSS AUC
# (`run.results["clients"][c]["attacks"]["loss"]["auc"]`), and between their sizes
# (`num_examples`) and the AUC.

# %%
auc = np.array([c["attacks"]["loss"]["auc"] for c in run.results["clients"]])
size = np.array([c["num_examples"] for c in run.results["clients"]])
### BEGIN SOLUTION
gaps = np.array([generalisation_gap(oracle, data, ids) for ids in data.clients])
rho_gap = spearmanr(gaps, auc).statistic
rho_size = spearmanr(size, auc).statistic
### STUB
gaps = todo("one gap per client")
rho_gap = todo("Spearman(gaps, auc)")
rho_size = todo("Spearman(size, auc)")
### END SOLUTION
print("gaps", gaps, "rho_gap", rho_gap, "rho_size", rho_size)

# %% check
check.correlations(gaps, rho_gap, rho_size, oracle, data, run.results)

# %% [markdown]
# ## Task 3.3 -- local epochs
#
# The shared federation trains 30 local epochs per round. Train the same federation with 2
# (a lighter run: LOSS only, no GNQ), and fill `table[name] = (pooled LOSS AUC, gap)` for
# both runs, the gap taken over all training samples (`data.train`).

# %%
light = lab_run(TARGET[0], [*TARGET[1], "train.local_epochs=2", "audit.gnq.client=false",
                            "attack.methods=['loss']", "attack.targets=['global']"])
runs = {"30 epochs": run, "2 epochs": light}
table = {}
for name, r in runs.items():
    t = load_target(r)
    ### BEGIN SOLUTION
    table[name] = (r.results["attacks"]["loss"]["auc"],
                   generalisation_gap(t.oracle, t.data, t.data.train))
    ### STUB
    table[name] = (todo("pooled LOSS AUC of this run"), todo("gap on t.data.train"))
    ### END SOLUTION
print(table)

# %% check
check.epochs_effect(table, runs)

# %% [markdown]
# ## Reflection
#
# 1. Is the correlation between gap and AUC strong across only 8 clients? What would you
#    need to trust it (think of the number of clients and of each client's audit-set size)?
# 2. Small clients: do they leak more or less here? Why would a client with few samples be
#    memorised more in 30 local epochs?
# 3. Fewer local epochs lowered the gap. Did it lower the accuracy too? What does this
#    suggest as a (free) defense, and what does it cost?

# %% [markdown] answer
# *Possible answers.* (1) With 8 points a Spearman correlation must be large to be
# significant (|rho| > 0.74 at the 5% level); each client's AUC also has a sampling error of
# a few hundredths with tens of members, so the per-client picture is noisy. (2) Usually
# more: many epochs over few samples fit each one exactly, so its loss is far below a
# non-member's. (3) Fewer local epochs narrow the gap and the attack's advantage, at some
# cost in accuracy per round (more rounds may recover it): a utility/privacy trade-off
# without any formal guarantee.
