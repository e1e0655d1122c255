# %% [markdown]
# # Lab 4 -- Res-MIA: membership from resolution erosion
#
# **Goal.** Res-MIA (docs/algorithms.md section 3; evaluated in its paper on a federated
# ResNet-18 with CIFAR-10) needs no label and no reference model: it blurs an image step by step
# (average-pool to a smaller size, upsample back) and watches the model's confidence in its
# original prediction fall. A model that memorised an image is confident on its fine
# details, so the confidence of a *member* drops more.
#
# **You will:** (1) write the erosion, (2) write the score, (3) run ablations (how many
# steps, which upsampling) and compare with the LOSS attack.

# %%
import numpy as np
import torch
import torch.nn.functional as F
from sklearn.metrics import roc_auc_score

from fedaudit.labs import TARGET, lab_run, load_target, todo
from fedaudit.labs.checks import resmia as check

run = lab_run(*TARGET)  # the shared federation of labs 1-5 (cached)
target = load_target(run)
print("images:", target.x.shape, " Res-MIA AUC by fedaudit:", run.results["attacks"]["resmia"]["auc"])

# %% [markdown]
# ## Task 4.1 -- the erosion
#
# `erode(x, size, upsample)`: `F.adaptive_avg_pool2d(x, size)` then `F.interpolate` back to
# the input's `(H, W)` with `mode=upsample` (`align_corners=False` for bilinear). `x` is a
# float tensor `(N, C, H, W)`; the digits are 8 x 8.

# %%
def erode(x: torch.Tensor, size: int, upsample: str = "nearest") -> torch.Tensor:
    ### BEGIN SOLUTION
    h, w = x.shape[-2:]
    pooled = F.adaptive_avg_pool2d(x, size)
    extra = {"align_corners": False} if upsample == "bilinear" else {}
    return F.interpolate(pooled, size=(h, w), mode=upsample, **extra)
    ### STUB
    # TODO: F.adaptive_avg_pool2d to (size, size), then F.interpolate back to (H, W)
    return todo("erode: pool down to size, upsample back")
    ### END SOLUTION


# %% check
check.erosion(erode)

# %% [markdown]
# ## Task 4.2 -- the score
#
# With sizes `s_1 > ... > s_K` and `x_k = erode(x_0, s_k)`: let `y*` be the class the model
# predicts on the original `x_0`, and `c_k` the probability of `y*` on `x_k`. The endpoint
# score is `(c_0 - c_K) / K` (higher = bigger drop = more likely a member).

# %%
def resmia_score(oracle, x: np.ndarray, sizes: list[int], upsample: str = "nearest") -> np.ndarray:
    xt = torch.from_numpy(np.ascontiguousarray(x, dtype=np.float32))
    ### BEGIN SOLUTION
    p0 = oracle.predict_proba(xt)
    y_star = p0.argmax(axis=1)
    rows = np.arange(len(x))
    c0 = p0[rows, y_star]
    c_k = oracle.predict_proba(erode(xt, sizes[-1], upsample))[rows, y_star]
    return (c0 - c_k) / len(sizes)
    ### STUB
    # TODO: y* = argmax on x_0; c_0 and c_K = probability of y* on x_0 and on x_K
    return todo("resmia_score: (c_0 - c_K) / K")
    ### END SOLUTION


# %% check
check.score(resmia_score, target.oracle, target.x[:64])

# %% [markdown]
# ## Task 4.3 -- ablations
#
# Compute the AUC on the whole audit set (`target.x`, `target.member`) for the erosion
# schedules `(4, 2, 1)` (the default: K = 3), `(4, 2)`, `(4,)` and `(2,)`, each with
# `"nearest"` and `"bilinear"` upsampling. Store them as `table[(sizes, upsample)] = auc`.
#
# Before you run it, predict: the endpoint score `(c_0 - c_K) / K` reads only the original
# image and the LAST eroded one, and dividing every score by the same K does not change
# their ranking. So which rows of the table must be equal?

# %%
table = {}
for sizes in [(4, 2, 1), (4, 2), (4,), (2,)]:
    for upsample in ["nearest", "bilinear"]:
        ### BEGIN SOLUTION
        s = resmia_score(target.oracle, target.x, list(sizes), upsample)
        table[(sizes, upsample)] = roc_auc_score(target.member, s)
        ### STUB
        table[(sizes, upsample)] = todo("AUC of Res-MIA with these sizes and upsampling")
        ### END SOLUTION
for k, v in table.items():
    print(k, round(float(v), 3) if not hasattr(v, "hint") else v)
print("LOSS AUC:", run.results["attacks"]["loss"]["auc"])

# %% check
check.ablations(table, target.oracle, target.x, target.member, run.results)

# %% [markdown]
# ## Reflection
#
# 1. On 8 x 8 digits, does Res-MIA beat the LOSS attack? Res-MIA was designed for
#    high-resolution images (CIFAR, ImageNet): why would it have more room there?
# 2. Res-MIA never uses the true label. When is that an advantage for an attacker?
# 3. Why must the sizes strictly decrease (what happens if you pool twice to the same
#    size)?
# 4. `(4, 2)` and `(2,)` give the same AUC, and `(4, 2, 1)` the AUC of the single size 1:
#    the step-count ablation is empty for the endpoint score. Which statistic of the decay
#    curve would make the intermediate sizes matter? (fedaudit has one:
#    `attacks.membership.resmia.resmia_scores(..., score="mean-slope")`.)

# %% [markdown] answer
# *Possible answers.* (1) Usually not here: an 8 x 8 image has little fine detail to
# erode, and a few steps reach a blank image; on large images the model's reliance on
# memorised high-frequency detail is what Res-MIA detects. (2) When labels are unknown
# (unlabelled candidate data, or a label-noise setting); LOSS needs y. (3) Average-pooling to
# the same size twice gives the same image (the operation is idempotent on an already
# pooled image), so the extra step adds queries and no information. (4) One that reads
# every step, e.g. the mean slope `(1/K) sum_k (c_0 - c_k) / k`; with the endpoint score the
# schedule only matters through its last size, so the intermediate steps cost queries and
# change nothing.
