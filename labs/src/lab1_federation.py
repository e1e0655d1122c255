# %% [markdown]
# # Lab 1 -- A federation: clients, partitions, accuracy
#
# **Goal.** Run a federated-learning scenario from Python, read what it leaves behind, and
# see how the way data is split across clients (IID or label-skewed) shapes each client's
# data and how well the global model serves each client.
#
# **You will:** (1) compute each client's label histogram, (2) measure how far a
# Dirichlet partition is from an IID one, (3) measure the global model's accuracy per
# client. Each task ends with a `check` cell.

# %%
import numpy as np

import fedaudit
from fedaudit.data import build_federated_data
from fedaudit.labs import TARGET, lab_run, load_target, todo
from fedaudit.labs.checks import federation as check

# %% [markdown]
# ## Running a scenario
#
# `fedaudit.run(scenario, overrides=[...])` trains a federation through Flower's simulation
# and returns a `Run`: `run.results` is results.json, `run.scores()` the attack scores,
# `run.report()` writes report.html. `lab_run` is the same with a cache, so the labs that
# share this federation train it once. The scenario is `membership-signal` (digits, small
# MLP) with the overrides printed below: 8 clients whose data is split by a Dirichlet(1.0)
# draw over the labels.

# %%
print(TARGET)
run = lab_run(*TARGET)
res = run.results
print("run directory:", run.dir)
print("final test accuracy:", res["model"]["test_accuracy"])
print("test accuracy per round:", [round(r["test_accuracy"], 3) for r in res["rounds"]])
print("clients' sizes:", [c["num_examples"] for c in res["clients"]])
print("report:", run.report())  # open it in a browser

# %% [markdown]
# `load_target(run)` opens the run: `target.data` holds the whole dataset (`data.x`,
# `data.y`), the clients' sample ids (`data.clients[c]`) and the test ids (`data.test`);
# `target.oracle` answers `predict_proba(x)` with the final global model.
#
# ## Task 1.1 -- label histograms
#
# Write `label_histograms(labels, clients, num_classes)`: a `(len(clients), num_classes)`
# integer array whose row `c` counts the labels of client `c`'s samples.

# %%
target = load_target(run)
data = target.data


def label_histograms(labels: np.ndarray, clients: list[np.ndarray], num_classes: int) -> np.ndarray:
    ### BEGIN SOLUTION
    return np.stack([np.bincount(labels[ids], minlength=num_classes) for ids in clients])
    ### STUB
    # TODO: one np.bincount(..., minlength=num_classes) per client, stacked into rows
    return todo("label_histograms: a (clients, classes) count matrix")
    ### END SOLUTION


# %% check
check.label_histograms(label_histograms, data.y, data.clients, data.num_classes, res)

# %% [markdown]
# ## Task 1.2 -- how skewed is a partition?
#
# Measure label skew as the mean, over clients, of the total-variation distance between a
# client's label distribution `p_c` and the federation's `p`:
# `skew = mean_c 1/2 sum_k |p_ck - p_k|` (0: every client looks like the whole). A client
# that holds a single class k is at `1 - p_k` from the federation's mix, about 0.9 with ten
# balanced classes: the distance to a mix that contains the client's own class never
# reaches 1, even when clients hold disjoint classes. Compare the Dirichlet partition with an IID one of the same data:
# `fedaudit.validate` resolves a scenario without training, and `build_federated_data`
# gives its partition.

# %%
iid = build_federated_data(fedaudit.validate(TARGET[0], [*TARGET[1], "data.partitioner=iid"]))
iid_hist = np.stack([np.bincount(iid.y[ids], minlength=iid.num_classes) for ids in iid.clients])
dirichlet_hist = np.array([c["label_histogram"] for c in res["clients"]])


def label_skew(hist: np.ndarray) -> float:
    ### BEGIN SOLUTION
    hist = np.asarray(hist, dtype=np.float64)
    p_c = hist / hist.sum(axis=1, keepdims=True)
    p = hist.sum(axis=0) / hist.sum()
    return float(np.mean(0.5 * np.abs(p_c - p).sum(axis=1)))
    ### STUB
    # TODO: normalise rows and the column sums to distributions; mean of 1/2 sum |p_c - p|
    return todo("label_skew: mean total-variation distance to the global label distribution")
    ### END SOLUTION


print("iid:", label_skew(iid_hist), "dirichlet:", label_skew(dirichlet_hist))

# %% check
check.label_skew(label_skew, iid_hist, dirichlet_hist)

# %% [markdown]
# ## Task 1.3 -- accuracy per client
#
# Write `accuracy(oracle, x, y)` (fraction of samples whose most probable class is the
# label), then compute the global model's accuracy on each client's own training samples.

# %%
def accuracy(oracle, x: np.ndarray, y: np.ndarray) -> float:
    ### BEGIN SOLUTION
    return float(np.mean(oracle.predict_proba(x).argmax(axis=1) == y))
    ### STUB
    # TODO: compare predict_proba(x).argmax(axis=1) with y
    return todo("accuracy: fraction of correct predictions")
    ### END SOLUTION


# %% check
check.client_accuracy(accuracy, target.oracle, data)

# %%
### BEGIN SOLUTION
per_client = np.array([accuracy(target.oracle, data.x[ids], data.y[ids]) for ids in data.clients])
### STUB
per_client = todo("one accuracy per client, on data.x[data.clients[c]]")
### END SOLUTION
print(per_client)

# %% check
check.per_client_accuracy(per_client, target.oracle, data)

# %% [markdown]
# ## Reflection
#
# 1. The global model is more accurate on the clients' training samples than on the test
#    split. What does that gap say about what the model remembers? (Lab 2 turns it into
#    an attack.)
# 2. Which clients have the most skewed label histograms? Is the global model worse for
#    them? Why can FedAvg's average serve a skewed client badly?
# 3. Rerun with `data.alpha=0.1` (stronger skew; copy `TARGET`'s overrides and add it).
#    What happens to the skew, the clients' sizes and the test accuracy?

# %% [markdown] answer
# *Possible answers.* (1) Training accuracy above test accuracy is overfitting: the model
# fits its own samples better than unseen ones, the signal membership inference uses.
# (2) FedAvg weighs clients by their size and averages updates that pull towards different
# label distributions; a small client whose classes are rare elsewhere is served worst.
# (3) Smaller alpha concentrates each client on fewer classes (skew rises towards 1),
# sizes become more unequal, and the global model usually converges more slowly.
