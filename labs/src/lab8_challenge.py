# %% [markdown]
# # Lab 8 -- Capstone: the membership-inference challenge
#
# **Goal.** Everything so far had the answers at hand. Here you get what a real attacker
# gets: a trained model behind an oracle and a list of candidate samples, some of them
# training members: on MNIST, the 1,000 training samples of a 10-client federation among
# 3,500 candidates (the other 2,500 never trained on). Nobody tells you which. Score every
# candidate (higher = more likely a member), submit, and be graded like a leaderboard:
# ranked by **AUC**, with **TPR at 1% FPR** beside it -- each next to what random scores
# reach, and the TPR with its 95% confidence interval.
#
# Why the rank is the AUC: with 2,500 non-members, 1% FPR allows 25 false positives, so
# the TPR there is a real measurement -- and on this federation the LOSS attack does NOT
# beat random scores at 1% FPR (docs/validation.md section 11), while it beats them
# clearly in AUC. A leaderboard ranked by TPR at 1% FPR would rank noise. Can you do
# better than chance at the low-FPR end?
#
# The instructor creates a challenge with `fedaudit lab challenge --seed S --download`
# (MNIST is downloaded once into `./data`; the students get the `student/` folder) and
# grades submissions with `fedaudit lab grade SUBMISSION.csv --key key.csv`. In this
# notebook you create one yourself with the Python API, and grade yourself with the key
# -- no peeking at it before!

# %%
import numpy as np

from fedaudit.labs import lab_dir, load_challenge, make_challenge, todo, write_submission
from fedaudit.labs import grade as grade_submission
from fedaudit.labs.checks import challenge as check

seed = 0
root = lab_dir() / f"challenge-{seed}"
if not root.exists():  # downloads MNIST into ./data once; trains the target (1-5 minutes)
    make_challenge(seed, lab_dir(), data="mnist", download=True)
challenge = load_challenge(root / "student")
print(challenge.oracle, "candidates:", challenge.x.shape, "labels known:", challenge.y[:10])

# %% [markdown]
# ## Task 8.1 -- your attack
#
# You have `challenge.oracle.predict_proba`, `challenge.x` and the true labels
# `challenge.y`. Any score built from them is allowed: LOSS, confidence, modified entropy
# (Song & Mittal 2021), Res-MIA, a combination, a calibration per class...

# %%
### BEGIN SOLUTION
proba = challenge.oracle.predict_proba(challenge.x)
n = len(challenge.y)
p = np.clip(proba, 1e-30, 1.0)
q = np.clip(1.0 - proba, 1e-30, 1.0)
p_y = p[np.arange(n), challenge.y]
# modified entropy (Song & Mittal 2021), negated so that higher = member
others = proba * np.log(q)
others[np.arange(n), challenge.y] = 0.0
scores = (1 - p_y) * np.log(p_y) + others.sum(axis=1)
### STUB
scores = todo("one score per candidate, higher = more likely a member")
### END SOLUTION

# %% check
check.scores_shape(scores, challenge)

# %% [markdown]
# ## Task 8.2 -- submit and grade
#
# `write_submission(path, challenge.id, scores)` writes the CSV (`id,score`) the grader
# reads. The grade's `csv_line()` is one leaderboard row and `summary()` says it in words.
# The check asks for an AUC at least 3 standard deviations above chance (0.5 + 3 x 0.011
# = 0.533 with MNIST's 1,000 members and 2,500 non-members).

# %%
path = write_submission(root / "my-submission.csv", challenge.id, scores)
grade = grade_submission(path, root / "key.csv")
print(grade.CSV_HEADER)
print(grade.csv_line())
print(grade.summary())

# %% check
check.beats_chance(grade)

# %% [markdown]
# ## Reflection
#
# 1. Your TPR at 1% FPR: how many of the members does that correspond to, and how many
#    non-members would you wrongly accuse at that threshold? Is it above what random
#    scores reach (`grade.chance.tpr_p95`)?
# 2. Which single score did best? Did combining scores help at low FPR, or only in AUC?
#    Why is the top of a LOSS ranking (the most confident candidates) no better than
#    chance on MNIST?
# 3. For an exam variant, what must the instructor keep secret (think of the seed and the
#    sample ids), and why does the challenge give anonymous, shuffled ids?

# %% [markdown] answer
# *Possible answers.* (1) TPR x n_members members found, at most 1% of the non-members
# (25 of 2,500) flagged. (2) The loss-type scores (LOSS, confidence, modified entropy) are
# close in AUC (about 0.57 on seed 0); at 1% FPR they are at chance: the most confident
# candidates are the easiest digits, members or not (on seed 0, 59 of the 3,500
# candidates get probability exactly 1.0 for their label, 38 of them non-members, more
# than the 25 false positives 1% FPR allows). Beating chance there needs a per-sample reference -- how confident is a model
# that did NOT train on this candidate? -- which LiRA, RMIA and FedMIA (lab 7) provide.
# (3) The seed: with it anyone can rebuild the data split and read membership off it. Ids
# and order are shuffled so that neither betrays which split a candidate came from.
