"""The torchvision datasets ``mnist``, ``fashion-mnist``, ``cifar10``, ``cifar100`` (train
and test splits concatenated), read from ``data.data_dir`` or downloaded with
``data.download = true``.  (Not named ``torchvision.py``, which would read as the
torchvision package itself.)"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from fedaudit.data.datasets.base import Dataset, register_dataset
from fedaudit.errors import ScenarioError
from fedaudit.scenario import DataConfig


_TORCHVISION = {
    # name: (torchvision class, folder torchvision looks in, files it needs)
    "mnist": ("MNIST", "MNIST/raw", ("train-images-idx3-ubyte", "t10k-images-idx3-ubyte")),
    "fashion-mnist": ("FashionMNIST", "FashionMNIST/raw",
                      ("train-images-idx3-ubyte", "t10k-images-idx3-ubyte")),
    "cifar10": ("CIFAR10", "cifar-10-batches-py", ("data_batch_1", "test_batch")),
    "cifar100": ("CIFAR100", "cifar-100-python", ("train", "test")),
}


def _load_torchvision(name: str, cfg: DataConfig) -> Dataset:
    import torchvision

    cls_name, folder, files = _TORCHVISION[name]
    root = Path(cfg.data_dir).expanduser()
    cls = getattr(torchvision.datasets, cls_name)
    parts = []
    for train in (True, False):
        try:
            parts.append(cls(root=str(root), train=train, download=cfg.download))
        except RuntimeError as exc:
            # torchvision raises RuntimeError("Dataset not found ...") when offline/missing
            expected = ", ".join(str(root / folder / f) for f in files)
            raise ScenarioError(
                f"data.dataset = {name!r}: not found under data.data_dir = {str(root)!r} "
                f"(expected {expected} ...); put the files there or set data.download = true"
                + (f" ({exc})" if cfg.download else "")) from None
    xs, ys = [], []
    for ds in parts:
        data = ds.data.numpy() if hasattr(ds.data, "numpy") else np.asarray(ds.data)
        if data.ndim == 3:  # (N, H, W) grayscale
            data = data[:, None]
        else:  # CIFAR: (N, H, W, C)
            data = data.transpose(0, 3, 1, 2)
        xs.append(data.astype(np.float32) / 255.0)
        ys.append(np.asarray(ds.targets, dtype=np.int64))
    classes = tuple(str(c) for c in parts[0].classes)
    return Dataset(name, np.concatenate(xs), np.concatenate(ys), classes)


for _name in _TORCHVISION:
    register_dataset(_name)(lambda cfg, _n=_name: _load_torchvision(_n, cfg))
