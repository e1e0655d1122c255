"""``digits``: scikit-learn's bundled 8x8 handwritten digits (offline)."""

from __future__ import annotations

import numpy as np

from fedaudit.data.datasets.base import Dataset, register_dataset
from fedaudit.scenario import DataConfig


@register_dataset("digits")
def load_digits_dataset(cfg: DataConfig) -> Dataset:
    """scikit-learn's bundled 8x8 handwritten digits (1,797 samples, offline)."""
    from sklearn.datasets import load_digits

    bunch = load_digits()
    x = (bunch.images.astype(np.float32) / 16.0)[:, None, :, :]
    return Dataset("digits", x, bunch.target.astype(np.int64), tuple(str(c) for c in range(10)))
