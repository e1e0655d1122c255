"""The baseline estimate of membership-inference security (MIS) that r_Qn is validated against.

Aubinais, Formont, Piantanida, Gassiat, arXiv 2502.06567 (AISTATS 2026): the MIS of a
training procedure A is ``1 - Adv(A)``, where the advantage is the best membership
discriminator's ``TPR - FPR`` on a sample drawn half from the training set, half from the
population. The paper checks r_Qn against an estimate of it obtained by *training a
discriminator*: many runs with random member sets, the released (quantized) model of each,
a classifier that tells members from non-members from the model's behaviour on them,
evaluated on runs it did not see (docs/algorithms.md section 10).

The form used here (:func:`mis_from_balanced_accuracy`): on a balanced held-out sample the
discriminator's ``TPR - FPR = 2 * BA - 1`` with BA its balanced accuracy, so

    MIS_hat = 1 - max(0, 2 * BA - 1)

in ``[0, 1]``; 1 = no discriminator beats chance, 0 = perfect separation. A held-out BA
below 1/2 is estimation noise of a chance-level discriminator (flipping it would need the
held-out labels), so the advantage is floored at 0 rather than taking ``|2 BA - 1|``.
Balanced accuracy rather than accuracy keeps the form right when a run's member and
non-member counts differ.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np
import torch
from sklearn.base import ClassifierMixin
from sklearn.ensemble import HistGradientBoostingClassifier
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import balanced_accuracy_score
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

__all__ = ["DISCRIMINATORS", "MisEstimate", "membership_features", "mis_baseline",
           "mis_from_balanced_accuracy"]

FEATURE_NAMES = ("loss", "true_class_probability", "max_probability", "entropy")


def _logistic(seed: int) -> ClassifierMixin:
    return make_pipeline(StandardScaler(), LogisticRegression(max_iter=1000, random_state=seed))


def _boosting(seed: int) -> ClassifierMixin:
    # a non-monotone discriminator: members may sit at BOTH ends of a feature (e.g. the
    # confidence of a quantized model that rounds some members' logits away)
    # (20 samples per leaf, scikit-learn's default: it needs a few hundred rows to split)
    return HistGradientBoostingClassifier(max_iter=100, max_leaf_nodes=15, min_samples_leaf=20,
                                          early_stopping=False, random_state=seed)


DISCRIMINATORS: dict[str, Callable[[int], ClassifierMixin]] = {
    "logistic": _logistic,
    "boosting": _boosting,
}


@dataclass(frozen=True)
class MisEstimate:
    """Outcome of :func:`mis_baseline`.

    Attributes:
        mis: ``1 - max(0, 2 * balanced_accuracy - 1)``, in [0, 1]; larger = more secure.
        balanced_accuracy: the discriminator's balanced accuracy on the held-out runs.
        discriminator: its name in :data:`DISCRIMINATORS`.
        train_runs, test_runs: number of runs it was trained / evaluated on.
        train_samples, test_samples: number of (run, sample) rows in each part.
        predictions: the discriminator's 0/1 prediction for each held-out row, in row order
            (for a bootstrap over held-out runs without refitting).
    """

    mis: float
    balanced_accuracy: float
    discriminator: str
    train_runs: int
    test_runs: int
    train_samples: int
    test_samples: int
    predictions: np.ndarray = field(repr=False, compare=False, default_factory=lambda: np.empty(0))


def mis_from_balanced_accuracy(balanced_accuracy: float) -> float:
    """``1 - max(0, 2 * BA - 1)`` (module docstring).

    Raises:
        ValueError: ``balanced_accuracy`` is not a finite number in [0, 1].
    """
    ba = float(balanced_accuracy)
    if not np.isfinite(ba) or not 0.0 <= ba <= 1.0:
        raise ValueError(f"balanced_accuracy must be in [0, 1], got {balanced_accuracy!r}")
    return 1.0 - max(0.0, 2.0 * ba - 1.0)


def membership_features(logits: torch.Tensor | np.ndarray, labels: torch.Tensor | np.ndarray) -> np.ndarray:
    """Per-sample behaviour of a released model, the discriminator's input (float64):
    columns ``FEATURE_NAMES`` = cross-entropy loss, probability of the true class, largest
    probability, entropy of the softmax.  For sequences (logits (N, L, V), next-token
    targets (N, L)) each feature is computed per token and averaged over the sequence's
    L tokens (the loss column is then the mean token NLL, the training loss).

    Raises:
        ValueError: logits not 2-D (or 3-D with (N, L) labels), labels not 1-D of the same
            length, a label outside ``[0, classes)``, or non-finite logits.
    """
    z = torch.as_tensor(logits).detach().to(torch.float64).cpu()
    y = torch.as_tensor(labels).detach().cpu()
    if z.ndim == 3 and tuple(y.shape) == tuple(z.shape[:2]):
        n, length, v = z.shape
        per_token = membership_features(z.reshape(n * length, v), y.reshape(n * length))
        return per_token.reshape(n, length, -1).mean(axis=1)
    if z.ndim != 2:
        raise ValueError(f"logits must be 2-D (samples x classes), got shape {tuple(z.shape)}")
    if y.ndim != 1 or y.shape[0] != z.shape[0]:
        raise ValueError(f"labels must be 1-D with {z.shape[0]} entries, got shape {tuple(y.shape)}")
    if y.numel() and (int(y.min()) < 0 or int(y.max()) >= z.shape[1]):
        raise ValueError(f"labels must be in [0, {z.shape[1]}), got range "
                         f"[{int(y.min())}, {int(y.max())}]")
    if not torch.isfinite(z).all():
        raise ValueError("logits must be finite")
    logp = torch.log_softmax(z, dim=1)
    p = logp.exp()
    true_logp = logp.gather(1, y.long().view(-1, 1)).squeeze(1)
    entropy = -(p * logp).sum(dim=1)
    return torch.stack([-true_logp, true_logp.exp(), p.max(dim=1).values, entropy], dim=1).numpy()


def mis_baseline(features: np.ndarray, membership: np.ndarray, runs: np.ndarray,
                 test_runs: Sequence[int], *, discriminator: str = "boosting",
                 seed: int = 0) -> MisEstimate:
    """The baseline MIS estimate: a discriminator trained on some runs, scored on others.

    Args:
        features: (rows x features) float array; a row is one sample scored by one run's
            released model (e.g. :func:`membership_features`).
        membership: (rows,) 0/1 or bool, 1 = the sample was in that run's training set.
        runs: (rows,) integer id of the run each row comes from.
        test_runs: the run ids held out for evaluation; every other run trains the
            discriminator.
        discriminator: a key of :data:`DISCRIMINATORS`.
        seed: the discriminator's random state.

    Returns:
        :class:`MisEstimate` with ``mis = 1 - max(0, 2 BA - 1)`` of the held-out balanced
        accuracy BA.

    Raises:
        ValueError: shapes that disagree, non-finite features, labels other than 0/1, a
            held-out run id that does not occur, no training run left, or a part without
            both members and non-members; an unknown discriminator (lists the allowed).
    """
    if discriminator not in DISCRIMINATORS:
        raise ValueError(f"unknown discriminator {discriminator!r}; allowed: "
                         f"{', '.join(sorted(DISCRIMINATORS))}")
    x = np.asarray(features, dtype=np.float64)
    m = np.asarray(membership)
    r = np.asarray(runs)
    if x.ndim != 2 or x.shape[0] == 0:
        raise ValueError(f"features must be 2-D (rows x features) with rows, got shape {x.shape}")
    if m.shape != (x.shape[0],) or r.shape != (x.shape[0],):
        raise ValueError(f"membership and runs must have shape ({x.shape[0]},), got "
                         f"{m.shape} and {r.shape}")
    if not np.isfinite(x).all():
        row = int(np.argwhere(~np.isfinite(x))[0, 0])
        raise ValueError(f"features must be finite; row {row} is not")
    if m.dtype.kind not in "biu" or not np.isin(m, (0, 1)).all():
        raise ValueError("membership must hold 0/1 (or bool) values")
    if r.dtype.kind not in "iu":
        raise ValueError(f"runs must hold integer run ids, got dtype {r.dtype}")
    held = np.unique(np.asarray(list(test_runs), dtype=np.int64))
    missing = np.setdiff1d(held, r)
    if held.size == 0 or missing.size:
        raise ValueError(f"test_runs must be run ids that occur in runs; missing: {missing.tolist()}"
                         if missing.size else "test_runs is empty: hold out at least one run")
    test = np.isin(r, held)
    if test.all():
        raise ValueError("every run is held out: no run left to train the discriminator")
    m = m.astype(np.int64)
    for part, mask in (("training", ~test), ("held-out", test)):
        if np.unique(m[mask]).size < 2:
            raise ValueError(f"the {part} runs must contain both members and non-members")
    clf = DISCRIMINATORS[discriminator](seed)
    clf.fit(x[~test], m[~test])
    pred = clf.predict(x[test]).astype(np.int64)
    ba = float(balanced_accuracy_score(m[test], pred))
    return MisEstimate(mis=mis_from_balanced_accuracy(ba), balanced_accuracy=ba,
                       discriminator=discriminator, train_runs=int(np.unique(r[~test]).size),
                       test_runs=int(held.size), train_samples=int((~test).sum()),
                       test_samples=int(test.sum()), predictions=pred)
