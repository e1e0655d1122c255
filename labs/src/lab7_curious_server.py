# %% [markdown]
# # Lab 7 -- What the curious server learns
#
# **Goal.** An outsider only sees the final global model, an average over every client.
# The server of a federation sees more: each client's own model (its update) every round.
# An honest-but-curious server can attack those directly -- each client's model has been
# trained on that client's data alone for many local epochs. FedMIA (Zhu et al. 2024,
# arXiv 2402.06289) goes further and uses the *other* clients' models of the round as
# reference models.
#
# **You will:** (1) attack one client's model by hand, (2) compare, client by client, what
# the server and the outsider learn, (3) read fedaudit's table of attacker positions.

# %%
import numpy as np
from sklearn.metrics import roc_auc_score

from fedaudit.labs import TARGET, client_oracle, lab_run, load_target, todo
from fedaudit.labs.checks import server as check

run = lab_run(*TARGET)  # the shared federation; attack.targets includes 'clients'
res = run.results
target = load_target(run)
scores = run.scores(as_frame=False)
print(res["server_view"]["model_seen"], "-- rounds attacked:", res["server_view"]["rounds"])

# %% [markdown]
# ## Task 7.1 -- attack client 1's model
#
# `client_oracle(run, c)` is an oracle on the model client `c` sent in the last round.
# Client c's audit set is in `run.scores()`: the rows with `target == "global"`,
# `method == "loss"` and `client == c` give its `sample_id`s and `member` labels. Score
# those samples with the LOSS score (`log p_y`) against client 1's own model, and compute
# the AUC.

# %%
c = 1
rows = (scores["target"] == "global") & (scores["method"] == "loss") & (scores["client"] == c)
ids, member = scores["sample_id"][rows], scores["member"][rows]
x, y = target.data.x[ids], target.data.y[ids]
### BEGIN SOLUTION
proba = client_oracle(run, c).predict_proba(x)
my_scores = np.log(np.maximum(proba[np.arange(len(y)), y], 1e-30))
my_auc = roc_auc_score(member, my_scores)
### STUB
my_auc = todo("LOSS AUC of client 1's audit set against client 1's own model")
### END SOLUTION
print(my_auc)

# %% check
check.server_auc(my_auc, res, client=c)

# %% [markdown]
# ## Task 7.2 -- client by client
#
# For every client, the server's LOSS AUC
# (`res["server_view"]["clients"][c]["rounds"][last]["loss"]["auc"]`) minus the
# outsider's (`res["clients"][c]["attacks"]["loss"]["auc"]`).

# %%
last = max(res["server_view"]["clients"][0]["rounds"], key=int)
### BEGIN SOLUTION
gain = np.array([res["server_view"]["clients"][k]["rounds"][last]["loss"]["auc"]
                 - res["clients"][k]["attacks"]["loss"]["auc"] for k in range(len(res["clients"]))])
### STUB
gain = todo("per client: server-view AUC minus outsider AUC")
### END SOLUTION
print(gain)

# %% check
check.gains(gain, res)

# %% [markdown]
# ## Attacker positions
#
# fedaudit summarises the positions (best method's pooled AUC and TPR at 1% FPR):

# %%
for p in res["attack_positions"]:
    print(f"{p['position']:15s} {p['target']:30s} best {p['best_method']:7s} "
          f"AUC {p['auc']:.3f} TPR@1%FPR {p['tpr_at_1pct_fpr']:.3f}")
print({m: round(v["auc"], 3) for m, v in res["server_view"]["pooled"].items()})

# %% [markdown]
# ## Reflection
#
# 1. Which clients leak most to the server? Relate it to their size (lab 3).
# 2. Secure aggregation hides individual updates from the server. Which of the attacks of
#    this lab would it stop, and which would remain?
# 3. FedMIA needs no shadow models of its own: where do its reference models come from,
#    and why are they a good reference for "a model that did not train on x"?

# %% [markdown] answer
# *Possible answers.* (1) Usually the small clients: their local models fit a few samples
# for many epochs. (2) Secure aggregation leaves the server only the sum of updates, so the
# per-client attacks (7.1, FedMIA) are stopped; attacks on the global model (the outsider
# position) remain. (3) The other clients' models of the same round: trained with the same
# recipe from the same starting point, on data that does not contain x.
