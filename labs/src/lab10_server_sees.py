# %% [markdown]
# # Lab 10 -- What the server sees: rebuilding a client's data from its update
#
# **Goal.** Labs 2-7 asked one question of a model: *was this sample a member?* The server
# of a federation can ask a harsher one of each update it receives: *what were the
# client's samples?* An update is a function of the client's data -- for one local step,
# `update = -lr * gradient(model_start, client batch)` -- and gradients can be inverted.
# Deep Leakage from Gradients (Zhu et al. 2019) and Inverting Gradients (Geiping et al.
# 2020) rebuild the images; iDLG (Zhao et al. 2020) reads the labels off the last layer.
#
# **You will:** (1) read a client's label from its update, (2) write Inverting Gradients'
# matching loss, (3) rebuild a client's digits from its update, (4) score reconstructions,
# (5) meet secure aggregation and the malicious server that defeats it, and watch batch
# size, local steps and DP-SGD take the pictures away.
#
# Everything runs in seconds on fedaudit's bundled 8 x 8 digits and an untrained MLP;
# `client_update(n)` trains one client on n digits with fedaudit's real local training
# and returns what the server holds: `update.model` (the global model the client started
# from), `update.start` and `update.received` (the two state dicts), the recipe (`lr`,
# `epochs`, `batch_size`, `num_examples`), and -- for the checks and the pictures only --
# the client's true digits `update.x`, `update.y`.

# %%
import copy

import numpy as np
import torch
import torch.nn.functional as F

from fedaudit.labs import todo
from fedaudit.labs.checks import inversion as check
from fedaudit.labs.updates import client_update, reconstruct

torch.set_num_threads(1)
one = client_update(1)  # one client, one digit, one SGD step: the update is one gradient
print({k: tuple(v.shape) for k, v in one.start.items()}, "lr", one.lr)

# %% [markdown]
# ## Task 10.1 -- the label, from the last layer
#
# The last layer computes logits `z = W h + b`. For one sample with label `y` and
# softmax output `p`, the cross-entropy's gradient with respect to row `j` of `W` is
# `(p_j - [j == y]) h`. After a ReLU, `h >= 0`: every row's gradient is >= 0 except row
# `y`'s, which is <= 0. The client's gradient is `-(received - start) / lr`.
# Sum each row of the last layer's weight gradient and find the label.

# %%
last = [k for k in one.start if k.endswith("weight")][-1]  # the last Linear's weight
### BEGIN SOLUTION
grad = -one.update(last) / one.lr
label = int(grad.sum(dim=1).argmin())
### STUB
label = todo("the class whose row of the last layer's gradient is negative")
### END SOLUTION
print("label read from the update:", label)

# %% check
check.label_from_update(label, one)

# %% [markdown]
# ## Task 10.2 -- the matching loss
#
# Inverting Gradients looks for images `x'` whose gradient `g'` (at the client's start
# model, with the labels) points the same way as the client's `g`:
#
# `loss = 1 - <g', g> / (|g'| |g|) + tv * TV(x')`
#
# with ONE cosine over all parameters together (dot products and squared norms summed over
# the layers) and the total variation `TV(x) = mean |x[..., :, 1:] - x[..., :, :-1]| +
# mean |x[..., 1:, :] - x[..., :-1, :]|`, a prior for natural images. The target `g` is
# data: detach it.

# %%
def matching_loss(dummy_grads, target_grads, x, tv):
    """1 - cosine(dummy, target) over all parameters + tv * TV(x)."""
    ### BEGIN SOLUTION
    target_grads = [t.detach() for t in target_grads]
    dot = sum((d * t).sum() for d, t in zip(dummy_grads, target_grads))
    nd = sum(d.pow(2).sum() for d in dummy_grads).sqrt()
    nt = sum(t.pow(2).sum() for t in target_grads).sqrt()
    tv_x = ((x[..., :, 1:] - x[..., :, :-1]).abs().mean()
            + (x[..., 1:, :] - x[..., :-1, :]).abs().mean())
    return 1 - dot / (nd * nt) + tv * tv_x
    ### STUB
    return todo("1 - cosine over all parameters + tv * total variation")
    ### END SOLUTION


# %% check
check.matching_loss(matching_loss)

# %% [markdown]
# ## Task 10.3 -- rebuild the client's digits
#
# Start from random images `x'` in `[0, 1]` (`requires_grad`), and repeat: compute the
# cross-entropy of `update.model` (the model the client STARTED from -- not the received
# one) on `(x', labels)`, its gradient with respect to the model's parameters with
# `create_graph=True` (so the loss can be differentiated again, with respect to `x'`), the
# matching loss against the client's gradient `-(received - start) / lr`, a backward pass,
# an Adam step on `x'`, and a clamp of `x'` to `[0, 1]`. The labels: task 10.1 showed they
# leak; here they are given.

# %%
def rebuild(update, labels, iterations=200, step=0.1, tv=1e-4, seed=0):
    """Images (n, 1, 8, 8) whose gradient at the client's start model matches its update."""
    model = copy.deepcopy(update.model)
    names = [n for n, _ in model.named_parameters()]
    params = [p for _, p in model.named_parameters()]
    y = torch.as_tensor(labels, dtype=torch.int64)
    gen = torch.Generator().manual_seed(seed)
    x = torch.rand((update.num_examples, *update.x.shape[1:]), generator=gen, requires_grad=True)
    ### BEGIN SOLUTION
    target = [(-update.update(n) / update.lr).float() for n in names]
    opt = torch.optim.Adam([x], lr=step)
    for _ in range(iterations):
        opt.zero_grad()
        dummy = torch.autograd.grad(F.cross_entropy(model(x), y), params, create_graph=True)
        matching_loss(dummy, target, x, tv).backward()
        opt.step()
        with torch.no_grad():
            x.clamp_(0.0, 1.0)
    ### STUB
    todo("the optimisation loop")
    ### END SOLUTION
    return x.detach().numpy()


images = rebuild(one, one.y)
print("pixel range", images.min(), images.max())

# %% check
check.rebuild(rebuild, one)

# %% [markdown]
# ## Task 10.4 -- score a reconstruction
#
# The attack returns its images in no particular order. Match each reconstruction to one
# of the client's true images by an optimal assignment on the mean squared error
# (`scipy.optimize.linear_sum_assignment`), then take each pair's PSNR, `10 log10(1 / MSE)`
# (images in `[0, 1]`), and their mean.

# %%
from scipy.optimize import linear_sum_assignment


def mean_psnr(images, true):
    """Mean PSNR (dB) of the reconstructions against their assigned true images."""
    ### BEGIN SOLUTION
    n = len(images)
    mse = ((np.asarray(images)[:, None] - true[None]) ** 2).reshape(n, len(true), -1).mean(-1)
    r, c = linear_sum_assignment(mse)
    return float(np.mean(10 * np.log10(1.0 / mse[r, c])))
    ### STUB
    return todo("the mean PSNR after an optimal assignment")
    ### END SOLUTION


# %% check
check.mean_psnr(mean_psnr)

# %% [markdown]
# ## Task 10.5 -- secure aggregation, and the server that changes the model
#
# With secure aggregation (Flower's SecAgg+: `federation.aggregation = "secagg+"` in a
# fedaudit scenario) the server receives only the mean of the clients' models. Tasks
# 10.1-10.4 need ONE client's update: they die (`fedaudit validate secagg --set
# "reconstruction.enabled=true"` refuses them in one line). A malicious server changes the
# model instead (Fowl et al. 2022, "Robbing the Fed"): it puts an imprint block in front,
# `k` bins `h_i = ReLU((mean pixel - c_i) / gain)` at increasing thresholds `c_i`, which
# every bin passes on to the network through the same weights. A sample whose mean pixel
# lies between `c_i` and `c_{i+1}` switches on bins 1..i, so the gradient of the block's
# first layer is, row by row, `dW_i = sum_{j above c_i} g_j x_j` and `db_i = sum_{j above
# c_i} g_j`. `imprinted_round()` gives you what that server holds after 4 clients of 4
# digits trained one step: `r.start`, `r.aggregate` (the mean of the 4 models: all that
# secure aggregation releases), the keys `0.linear0.weight` (k x 64) and `0.linear0.bias`.
# Read the digits back: `(dW_i - dW_{i+1}) / (db_i - db_{i+1})` (the last bin against
# zero) for every bin whose bias difference is not (nearly) zero, each reshaped to
# (1, 8, 8).

# %%
from fedaudit.labs.updates import imprinted_round

r = imprinted_round()
### BEGIN SOLUTION
w = (r.aggregate["0.linear0.weight"] - r.start["0.linear0.weight"]).double()
b = (r.aggregate["0.linear0.bias"] - r.start["0.linear0.bias"]).double()
dw = w - torch.cat([w[1:], torch.zeros_like(w[:1])])
db = b - torch.cat([b[1:], torch.zeros(1, dtype=b.dtype)])
keep = db.abs() > 1e-3 * db.abs().max()
images = (dw[keep] / db[keep, None]).reshape(-1, 1, 8, 8).numpy()
### STUB
images = todo("one (1, 8, 8) image per bin the round's samples reached")
### END SOLUTION
print(len(images), "images read from the aggregate of", len(r.x), "digits")

# %% check
check.imprint_readout(images, r)

# %% [markdown]
# ## What takes the pictures away
#
# The same attack -- yours, and fedaudit's own `reconstruct` beside it -- on clients that
# hold more digits (one batch), train several local steps, or train with DP-SGD. (DP-SGD
# clips each sample's gradient to norm 1 and adds Gaussian noise of std `z` times that.)

# %%
import matplotlib.pyplot as plt

settings = {"B=1": dict(n=1), "B=4": dict(n=4), "B=8": dict(n=8),
            "B=4, 3 steps": dict(n=4, epochs=3),
            "B=4, DP-SGD z=0.5": dict(n=4, noise_multiplier=0.5)}
shown = {}
for name, kw in settings.items():
    u = client_update(**kw)
    mine = rebuild(u, u.y, iterations=200) if u.epochs == 1 else None  # one step only
    theirs = reconstruct(u, iterations=200)  # unrolls the local steps
    shown[name] = (u, theirs)
    yours = "    -" if mine is None else f"{mean_psnr(mine, u.x):5.1f}"
    print(f"{name:18s} yours {yours} dB   fedaudit {mean_psnr(theirs, u.x):5.1f} dB")

fig, axes = plt.subplots(2, len(shown), figsize=(2 * len(shown), 4))
for j, (name, (u, rec)) in enumerate(shown.items()):
    axes[0, j].imshow(u.x[0, 0], cmap="gray", vmin=0, vmax=1)
    axes[0, j].set_title(name, fontsize=8)
    mse = ((rec - u.x[0]) ** 2).reshape(len(rec), -1).mean(1)
    axes[1, j].imshow(rec[int(np.argmin(mse)), 0], cmap="gray", vmin=0, vmax=1)
    for a in axes[:, j]:
        a.axis("off")
plt.show()

# %% [markdown]
# ## Reflection
#
# 1. Why does the cosine distance not need the client's learning rate, when the L2
#    distance of DLG does?
# 2. Your `rebuild` simulates one SGD step. What would a server have to know to invert an
#    update of 3 local steps (fedaudit's `reconstruct` unrolls them)? Which of it does a
#    FedAvg server know?
# 3. Which of the settings above protects the images, and at what cost to the model (labs
#    6 and 7)? Is the DP-SGD row's protection a guarantee or a measurement?
# 4. Secure aggregation hides individual updates. Which tasks of this lab would still
#    work against the sum of 10 clients' updates?
# 5. In task 10.5, two of the 16 digits did not come back. Why not, and how would the
#    server get more of them? What does secure aggregation change for this server, and
#    what would (DP noise on the aggregate, a client that checks the model it receives)?

# %% [markdown] answer
# *Possible answers.* (1) The cosine is invariant to the scale of either gradient, and an
# update is the gradient times -lr: the scale is all lr changes. L2 compares magnitudes,
# so the server must divide by lr first (it knows lr in FedAvg). (2) The recipe: the
# learning rate, the number of local steps and the batches' sizes, and the model it sent
# (the starting point); a FedAvg server sets all of them. It does not know which samples
# went into which batch, or their order when the client reshuffles. (3) On these digits the
# reconstructions stay sharp at B = 4 and fade at B = 8 and with DP-SGD; with 3 local steps
# on one batch fedaudit's unrolled attack still succeeds (docs/validation.md section 13).
# DP-SGD's protection here is measured, not guaranteed: its epsilon bounds membership
# inference, and a reconstruction implies membership, so it bounds this attack's success
# too, but the numbers in this lab are one attack's. (4) Label counts and images of the
# SUM of 10 clients' updates: the aggregate is one gradient of a batch of 10x the samples,
# so the attacks meet the B = 8 row's difficulty and worse. (5) Two digits shared a bin
# with another (the bin gives their weighted mean, not either of them): more bins, or fewer
# samples per round, separate more -- the expected share is (k/(k+1))^N for N samples and
# k bins. Secure aggregation changes nothing for this server: it needs only the aggregate
# (docs/validation.md sections 15-16 measure it through Flower's SecAgg+). DP noise on the
# aggregate buries the block's signal; a client that inspects the architecture it receives
# would refuse a model with a k x d layer in front of it.
