# %% [markdown]
# # Lab 9 -- The secret sharer in a federation
#
# **Goal.** Membership inference asks "was this sample trained on?". For a language model
# there is a sharper question: has it memorised a secret that appeared in one client's
# text, so that anyone holding the model can read it back? Carlini et al. ("The Secret
# Sharer", USENIX Security 2019; docs/algorithms.md section 12) measure it by planting
# *canaries*: a template such as `my secret number is ` followed by a random 5-digit
# secret, inserted k times into the training text. A secret never inserted anywhere (a
# *reference*) tells what a model that did not see it does.
#
# Here a federation of speakers from a Shakespeare play trains a small character
# transformer; clients 0, 1 and 2 each hold two secrets at each of 1, 4 and 16 repeats,
# and 20 reference secrets are inserted nowhere. **You will:** (1) compute a secret's
# log-perplexity from the model's next-character probabilities, (2) rank it among all
# 100,000 candidates and compute its *exposure*, (3) watch exposure grow with repeats, on
# the released global model and on what the server sees of one client, (4) try to extract
# a secret by greedy decoding and relate Gradient Uniqueness (GNQ, lab 5) to exposure,
# (5) reflect on defenses.
#
# **Data.** The federation trains on a UTF-8 play of `NAME:` speeches, the "tiny
# shakespeare" corpus (1.1 MB; public domain; `data/tinyshakespeare/input.txt` of the
# github.com/karpathy/char-rnn repository). Put it at `data/tinyshakespeare.txt` next to
# the notebook or in the repository, set `$FEDAUDIT_LAB_TEXT` to its path, or set `TEXT`
# below.

# %%
import math

import numpy as np
from scipy.stats import spearmanr

from fedaudit.labs import lab_run, language_model, secrets_target, todo
from fedaudit.labs.checks import secrets as check
from fedaudit.secrets import beam_decode, candidate_log_perplexities

np.set_printoptions(precision=2)
TEXT = None  # a path to the play; None: $FEDAUDIT_LAB_TEXT, else tinyshakespeare.txt found
#              in ./, ./data/, the repository's data/ or ../shared/data/ beside it
print(secrets_target(TEXT))
run = lab_run(*secrets_target(TEXT))  # trains once (1-2 minutes on 2 CPU cores), then cached
res = run.results
lm = language_model(run)  # the released global model
sec = lm.secrets
length = sec.tokens.shape[1]
print(lm.name, "| vocabulary:", len(lm.vocab), "characters | test next-character accuracy",
      round(res["model"]["test_accuracy"], 3))
print("template:", repr(lm.decode(sec.prefix)), "| alphabet:", lm.decode(sec.alphabet),
      "| secret length:", length)
planted = sec.client >= 0
print(f"{planted.sum()} planted secrets (clients {sorted(set(sec.client[planted].tolist()))}, "
      f"repeats {sorted(set(sec.repeats[planted].tolist()))}), {(~planted).sum()} references")

# %% [markdown]
# `lm.next_log_probs(contexts)` is the model as an attacker queries it: `contexts` is a
# 2-D integer array (B, T) of token ids, one context per row; it returns a (B, V) array of
# the **natural-log** probabilities of the next token after each context. `lm.encode(text)`
# and `lm.decode(tokens)` convert between characters and token ids. `sec` holds the secrets
# (`sec.prefix`: the template's tokens, `sec.alphabet`: the digits' tokens, `sec.tokens`:
# one row per secret, `sec.client` (-1 for a reference), `sec.repeats` (0 for a reference)),
# in the order of `res["secrets"]`.
#
# ## Task 9.1 -- the log-perplexity of a secret
#
# The log-perplexity of a secret r = r_1 ... r_n after the prefix p (the template) is, in
# **bits**,
#
# `Px(r) = - sum_i log2 Pr(r_i | p, r_1 ... r_{i-1})`
#
# a sum over the secret's tokens, each predicted from the whole prefix and the secret's
# tokens before it. Write `log_perplexity(next_log_probs, prefix, secret)`. (The check
# tries it on a hand-made table of next-token probabilities, then on every secret.)

# %%
def log_perplexity(next_log_probs, prefix: np.ndarray, secret: np.ndarray) -> float:
    ### BEGIN SOLUTION
    context = np.asarray(prefix, dtype=np.int64)
    nats = 0.0
    for tok in secret:
        nats -= next_log_probs(context[None, :])[0, tok]
        context = np.append(context, tok)
    return nats / math.log(2)
    ### STUB
    # TODO: for each token of the secret, its log-probability after prefix + the secret's
    # tokens before it (next_log_probs wants 2-D contexts: context[None, :]); sum, negate,
    # and convert natural logs to bits
    return todo("log_perplexity: Px of the secret after the prefix, in bits")
    ### END SOLUTION


# %% check
check.log_perplexity(log_perplexity, lm)

# %%
px = np.array([log_perplexity(lm.next_log_probs, sec.prefix, t) for t in sec.tokens])
for k in sorted(set(sec.repeats.tolist())):
    name = "references" if k == 0 else f"{k:2d} repeats"
    print(f"{name:12s} mean Px {px[sec.repeats == k].mean():6.2f} bits")
print(f"a uniform guess over the digits: {length * math.log2(10):.2f} bits")

# %% [markdown]
# ## Task 9.2 -- rank and exposure
#
# A low Px alone says little: some digit strings are simply likelier than others. The
# secret sharer ranks the secret among **every** candidate R (here all 10^5 strings of 5
# digits) by Px:
#
# `rank(r) = |{r' in R : Px(r') <= Px(r)}|`   (ties count against the secret; rank 1 = the
# most likely candidate)
#
# `exposure(r) = log2 |R| - log2 rank(r)`   (0 to log2 10^5 = 16.6 bits)
#
# A model that never saw r ranks it like any candidate: its expected exposure is about
# 1/ln 2 = 1.44 bits. Write `exposure(secret_px, all_px)` for one secret (`all_px`: every
# candidate's Px, the secret's included).

# %%
def exposure(secret_px: float, all_px: np.ndarray) -> float:
    ### BEGIN SOLUTION
    rank = int(np.sum(all_px <= secret_px))
    return math.log2(len(all_px)) - math.log2(rank)
    ### STUB
    # TODO: the rank (how many candidates have Px <= secret_px), then log2 |R| - log2 rank
    return todo("exposure: log2 |R| - log2 rank, in bits")
    ### END SOLUTION


# %% check
check.exposure(exposure)

# %% [markdown]
# `candidate_log_perplexities` (fedaudit.secrets) gives every candidate's Px in one tree
# walk: the 10^5 candidates share their prefixes, so 1 + 10 + 100 + 1,000 + 10,000 model
# calls suffice (a few seconds). Candidate number i is the digit string of i (`00000` is
# candidate 0), so a secret's own Px is `all_px[int(secret_text)]`: read from the same
# numbers, no rounding can split a tie between the secret and a candidate. Compute every
# secret's exposure on the global model, in the order of `sec` (planted and references).

# %%
all_px = candidate_log_perplexities(lm.next_log_probs, sec.prefix, sec.alphabet, length)
index = np.array([int(sec.text(s, lm.vocab)) for s in range(sec.size)])
print(all_px.shape, "candidates; the 5 most likely:",
      [f"{i:05d}" for i in np.argsort(all_px, kind="stable")[:5]])
### BEGIN SOLUTION
expo = np.array([exposure(all_px[i], all_px) for i in index])
### STUB
expo = todo("one exposure per secret of sec, on the global model")
### END SOLUTION
print(expo)

# %% check
check.exposures(expo, all_px, lm, res)

# %% [markdown]
# ## Task 9.3 -- exposure grows with repeats; what the server sees
#
# (a) The mean exposure on the global model by number of repeats:
# `by_repeats = {0: references' mean, 1: ..., 4: ..., 16: ...}`.

# %%
### BEGIN SOLUTION
by_repeats = {int(k): float(expo[sec.repeats == k].mean()) for k in np.unique(sec.repeats)}
### STUB
by_repeats = todo("{repeats: mean exposure on the global model}, 0 = the references")
### END SOLUTION
print(by_repeats)

# %% check
check.by_repeats(by_repeats, expo, lm, res)

# %% [markdown]
# (b) The global model averages six clients. The server also receives each client's own
# model every round (lab 7): `language_model(run, 0)` is client 0's model as the server
# last received it. Enumerate the candidates on it, compute every secret's exposure there
# (`expo0`), then `server`: the mean exposure by repeats of **client 0's own** secrets and
# of the references (key 0) on that model.

# %%
lm0 = language_model(run, 0)
all_px0 = candidate_log_perplexities(lm0.next_log_probs, sec.prefix, sec.alphabet, length)
### BEGIN SOLUTION
expo0 = np.array([exposure(all_px0[i], all_px0) for i in index])
mine = (sec.client == 0) | (sec.client < 0)
server = {int(k): float(expo0[mine & (sec.repeats == k)].mean())
          for k in np.unique(sec.repeats[mine])}
### STUB
expo0 = todo("every secret's exposure on client 0's model")
server = todo("{repeats: mean exposure of client 0's secrets (0: the references) on its model}")
### END SOLUTION
print(lm0.name, server)

# %% check
check.server_view(server, expo0, all_px0, lm0, res, client=0)

# %% [markdown]
# fedaudit's secrets stage measured the same on every view (results.json
# `secrets_summary`; `secrets` has each secret's numbers):

# %%
summary = res["secrets_summary"]
keys = sorted(summary["global"]["mean_exposure"], key=int)
print(f"{'view (mean exposure, bits)':30s}" + "".join(
    f"{'refs' if k == '0' else 'x' + k:>8s}" for k in keys) + "  extracted")
rows = [("global model", summary["global"])] + [
    (f"client {c['client']}'s model (server)", c) for c in summary["clients"]]
for name, row in rows:
    print(f"{name:30s}" + "".join(f"{row['mean_exposure'][k]:8.2f}" for k in keys)
          + f"  {row['extracted']}")
print(f"(max {summary['max_exposure']:.2f} bits; {summary['method']})")

# %% [markdown]
# ## Task 9.4 -- extracting a secret, and GNQ
#
# Exposure needs the secret to rank it. An attacker who knows only the template and the
# format (5 digits) can instead *decode*: start from the template and take, five times, the
# most likely digit after what is there so far. Write `greedy(next_log_probs, prefix,
# alphabet, length)` returning the decoded tokens (fedaudit's `beam_decode(..., beam=1)`
# does the same).

# %%
def greedy(next_log_probs, prefix: np.ndarray, alphabet: np.ndarray, length: int) -> np.ndarray:
    ### BEGIN SOLUTION
    context = np.asarray(prefix, dtype=np.int64)
    out = []
    for _ in range(length):
        logp = next_log_probs(context[None, :])[0]
        tok = int(alphabet[int(np.argmax(logp[alphabet]))])
        out.append(tok)
        context = np.append(context, tok)
    return np.array(out, dtype=np.int64)
    ### STUB
    # TODO: length times: the most likely token AMONG the alphabet after the context, then
    # append it to the context (the context starts as the prefix)
    return todo("greedy: the decoded tokens")
    ### END SOLUTION


# %% check
check.greedy(greedy)

# %% [markdown]
# Decode on the global model and on the server's view of each client holding secrets;
# `decoded = {"global": string, 0: string, 1: string, 2: string}` (`lm.decode(tokens)`).
# Which of them are planted secrets?

# %%
texts = [sec.text(s, lm.vocab) for s in range(sec.size)]
holders = sorted(set(sec.client[planted].tolist()))  # the clients holding secrets
views = {"global": lm, **{c: language_model(run, c) for c in holders}}
### BEGIN SOLUTION
decoded = {v: m.decode(greedy(m.next_log_probs, sec.prefix, sec.alphabet, length))
           for v, m in views.items()}
### STUB
decoded = todo("{view: the greedy decoding as a string} for every view")
### END SOLUTION
print(decoded)

# %% check
check.extraction(decoded, views, res)

# %%
for v, d in decoded.items():
    owner = [(int(sec.client[s]), int(sec.repeats[s])) for s in range(sec.size) if texts[s] == d]
    print(f"{v!s:7s} {d}", "-> planted secret (client, repeats):" if owner else "", *owner)

# %% [markdown]
# One template, one greedy decoding: at most one secret per model can come out, even
# when two are memorised. A beam of b decodings is b guesses; on client 0's model:

# %%
beams, beam_px = beam_decode(lm0.next_log_probs, sec.prefix, sec.alphabet, length, beam=8)
for b, p in zip(beams, beam_px):
    d = lm.decode(b)
    owner = [(int(sec.client[s]), int(sec.repeats[s])) for s in range(sec.size) if texts[s] == d]
    print(d, f"Px {p:5.2f} bits", *(["<- client, repeats", *owner] if owner else []))

# %% [markdown]
# **GNQ.** Every planted secret also has a GNQ percentile in its client
# (`res["secrets"][i]["gnq_percentile"]`: how unique its gradient was during training,
# 100 = the most unique). Compute `rho`, the Spearman correlation between the planted
# secrets' GNQ percentiles and their exposures on the global model (the references were
# never trained on: they have no GNQ).

# %%
### BEGIN SOLUTION
rows = [e for e in res["secrets"] if e["client"] is not None and e["gnq_percentile"] is not None]
rho = spearmanr([e["gnq_percentile"] for e in rows], [e["exposure"] for e in rows]).statistic
### STUB
rho = todo("Spearman(GNQ percentile, exposure) over the planted secrets")
### END SOLUTION
print(rho)

# %% check
check.gnq_vs_exposure(rho, res)

# %%
for k in sorted(set(sec.repeats[planted].tolist())):
    g = [e["gnq_percentile"] for e in res["secrets"]
         if e["repeats"] == k and e["client"] is not None]
    print(f"{k:2d} repeats: mean GNQ percentile {np.mean(g):5.1f}, mean exposure "
          f"{by_repeats[k]:5.2f} bits")

# %% [markdown]
# ## Reflection
#
# 1. How do the references' exposures compare with 1/ln 2 = 1.44 bits, and why is that
#    the right baseline? How many repeats does a secret need before the global model
#    exposes it clearly?
# 2. Compare the global model with the server's view of client 0 (Task 9.3). Why does a
#    client's own model expose its secrets more? What does that mean for the server of a
#    federation, and what would secure aggregation change?
# 3. A defense: train with DP-SGD (lab 6). What would it bound, and how would the exposure
#    of a secret repeated 16 times in one client's data change, with sample-level DP
#    (each sequence) and with client-level DP (each client's whole contribution)?
# 4. GNQ (lab 5) flagged mislabeled canaries as the most unique samples. Why is a secret
#    repeated 16 times *not* the most unique by GNQ, although it is the most exposed? What
#    does that say about using GNQ alone to find memorisation?
# 5. Greedy decoding extracts at most one secret per model. How does a beam change that,
#    and why is exposure a better audit than counting extractions?

# %% [markdown] answer
# *Possible answers.* (1) On this federation (seed 0) the 20 references average
# 1.25 bits on the global model (1.1-1.6 on the clients' models): the exposure of a
# uniformly random rank is -log2 U, exponential with mean and standard deviation 1/ln 2 =
# 1.44 bits, so a mean of 20 lies within about 0.3 bit of 1.44. The references were drawn
# like the secrets and trained on by no one, so they are exactly "a secret the model did
# not see", measured on the same model. (Their Px, about 29 bits, is above a uniform
# guess's 16.6: the model puts its probability on a few digit strings after the template,
# those of the planted secrets and blends of them, so most strings get less than
# uniform.) One insertion is not visible on the global model (1.23 bits); 4 repeats give
# 3.74 bits, 16 repeats 9.18 bits (rank about 170 of 100,000). (2) On client 0's own
# model: 2.46, 6.07 and 16.11 bits for 1, 4 and 16 repeats -- both 16-repeat secrets at
# rank 1 and 2. The client's model trained on its own data only; the global model
# averages it with five models that never saw the secret, which dilutes the memorisation.
# A curious server holds the client's model, so it can read secrets the released model
# only hints at. Secure aggregation would show the server only the sum of the updates:
# its view would be the global model's, and the per-client exposure above would be out
# of its reach (the released model's remains). (3) DP-SGD clips each example's
# gradient and adds Gaussian noise: with (epsilon, delta) sample-level DP, any test that
# tells whether one sequence was in the data has TPR <= e^epsilon FPR + delta (lab 6), so
# the secret's rank cannot move far from a reference's -- for one insertion. A secret
# inserted 16 times is 16 sequences: group privacy gives only 16 epsilon (and a delta
# that grows too), so sample-level DP at a moderate epsilon may still let a 16-repeat
# secret through. Client-level DP (clipping and noising each client's whole update)
# protects everything one client holds, repeats included, at the price of more noise (or
# more clients) for the same utility. Carlini et al. found DP-SGD drove exposure to the
# references' level, at a cost in accuracy. (4) GNQ measures how much a gradient stands
# out from the OTHER samples of its batch, with a leave-one-out solve: 16 copies of a
# secret push in the same direction, so each copy's gradient is well explained by the
# others (and, once the secret is memorised, its loss and gradient are small). A
# repeated secret is the opposite of unique; the rarest, one-off sequences are. Here the mean
# GNQ percentile is 64 for secrets inserted once, 37 for 4 repeats and 18 for 16 repeats,
# and Spearman(GNQ percentile, exposure) over the 18 planted secrets is -0.55 (p = 0.02):
# the more exposed, the LESS unique by GNQ.
# GNQ finds samples that stand out, not everything the model memorised: a repeated
# string is memorised precisely because it is NOT unique. (5) A beam of b keeps b
# guesses, so up to b memorised secrets behind one template can come out (the beam on
# client 0's model shows a second memorised secret right behind the first). Greedy does not
# even find the most likely candidate for sure: on client 2's model its 16-repeat secret
# 85729 has rank 1 (16.61 bits), but after the template the first digit 3 (probability
# 0.41: several secrets start with 3) beats 8 (0.33), greedy commits to it and ends at
# 30909; a beam of 2 finds 85729 first. Extraction is
# all or nothing and depends on the decoder; exposure grades every secret, including
# those partly memorised (a few bits above the references) that no decoder would print
# yet.
