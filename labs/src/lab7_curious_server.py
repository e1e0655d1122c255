# %% [markdown]
# # Lab 7 -- What the curious server learns
#
# **Goal.** An outsider only sees the final global model, an average over every client.
# The server of a federation sees more: each client's own model (its update) every round.
# An honest-but-curious server can attack those directly -- each client's model has been
# trained on that client's data alone for many local epochs. FedMIA (Zhu et al. 2024,
# arXiv 2402.06289) also uses the *other* clients' models of the round as reference
# models, and every round the server saw; task 7.3 measures whether that beats the plain
# LOSS attack on this federation, and where.
#
# **You will:** (1) attack one client's model by hand, (2) compare, client by client, what
# the server and the outsider learn, (3) compare FedMIA with LOSS at the server, (4) read
# fedaudit's table of attacker positions.

# %%
import numpy as np
from sklearn.metrics import roc_auc_score, roc_curve

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
# `client_oracle(run, c)` is an oracle on the model client `c` sent in the last round
# (`client_oracle(run, c, r)`: in round `r`; the server kept every round's models).
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
# ## Task 7.3 -- FedMIA against LOSS, at the curious server
#
# FedMIA scores client c's sample x with c's model *and* the other clients' models of the
# same round: they never trained on x, so their confidence on x is what "a model that did
# not see x" gives -- a reference for this very sample, where LOSS compares every sample
# with one global threshold. The score is a one-sided test, `log Pr[Z <= phi(x)]` with `Z`
# a Gaussian fitted to the other models' logit-scaled confidences: high when c's model is
# far more confident on x than models that did not train on it. Over several rounds the
# server averages each sample's per-round scores.
#
# In `run.scores()` the rows with `target == f"client-model:r{r}"` hold what the server
# computed on round r's models, for `method` `"loss"` and `"fedmia"`, client by client.
# Build `table = {"loss": (auc, tpr_at_1pct_fpr), "fedmia": (auc, tpr_at_1pct_fpr)}`, pooled
# over every client's rows (a client's members and its own non-members): LOSS on the last
# round's models; FedMIA with each (client, sample)'s score averaged over all rounds.

# %%
rounds = sorted(res["server_view"]["clients"][0]["rounds"], key=int)
### BEGIN SOLUTION
table = {}
for method, used in (("loss", [last]), ("fedmia", rounds)):
    pooled_scores, pooled_member = [], []
    for k in range(len(res["clients"])):
        per_round = []
        for r in used:
            rows = ((scores["target"] == f"client-model:r{r}") & (scores["method"] == method)
                    & (scores["client"] == k))
            if rows.any():
                order = np.argsort(scores["sample_id"][rows], kind="stable")
                per_round.append(scores["score"][rows][order])
                mem = scores["member"][rows][order]
        pooled_scores.append(np.mean(per_round, axis=0))
        pooled_member.append(mem)
    s, m = np.concatenate(pooled_scores), np.concatenate(pooled_member)
    fpr, tpr, _ = roc_curve(m, s, drop_intermediate=False)
    table[method] = (float(roc_auc_score(m, s)), float(tpr[fpr <= 0.01].max()))
### STUB
table = todo("{'loss': (auc, tpr), 'fedmia': (auc, tpr)} of the pooled server view")
### END SOLUTION
print(table)

# %% check
check.fedmia_vs_loss(table, res)

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
# 4. Task 7.3: does FedMIA beat LOSS in AUC? At 1% FPR? How many false positives does 1%
#    FPR allow on these pooled rows (`min_fpr_resolution`), and is the difference at 1% FPR
#    larger than its uncertainty (`fedaudit.labs.leaderboard.tpr_interval`)?
# 5. Compare each client's LOSS AUC round by round (`res["server_view"]["clients"][c]
#    ["rounds"]`): which round's models leak most?

# %% [markdown] answer
# *Possible answers.* (1) Usually the small clients: their local models fit a few samples
# for many epochs. (2) Secure aggregation leaves the server only the sum of updates, so the
# per-client attacks (7.1, FedMIA) are stopped; attacks on the global model (the outsider
# position) remain. (3) The other clients' models of the same round: trained with the same
# recipe from the same starting point, on data that does not contain x. (4) Measured on
# this federation (docs/validation.md section 11): FedMIA averaged over the 4 rounds has
# the LOWER pooled AUC (0.706 against LOSS's 0.718 on the last round) but the higher TPR
# at 1% FPR (0.064 against 0.044) and at 0.1% FPR (0.036 against 0.016). That is what its
# one-sided, per-sample test is built for: it ignores samples that are merely easy (every
# model is confident on them) and flags the few on which the client's model is far more
# confident than the other clients' models. But the pooled rows hold 250 non-members, so
# 1% FPR is 2 false positives, and 16 against 11 members found sits inside both
# figures' 95% intervals (about 0.04-0.10 and 0.02-0.08): on this small federation the
# low-FPR advantage is suggestive, not established. FedMIA's paper gains most with many
# clients (more references per round) and many rounds. (5) On this run the first round's
# models leak most for 5 of the 8 clients (measured once, one seed); a plausible reason is
# that a client's first local training starts from an untrained global model and moves
# furthest towards its own data.
