"""Dataset loaders, one module each: every loader returns images as float32 (N, C, H, W) in
[0, 1] and int64 labels; the position of a sample in these arrays is its global sample id.

* ``base``: the :class:`Dataset` type, the registry :data:`DATASETS` (name -> loader
  ``fn(data_cfg) -> Dataset``), :func:`register_dataset`, :func:`load_dataset`.
* the built-in datasets: ``digits``; ``torchvision_sets`` (``mnist``, ``fashion-mnist``,
  ``cifar10``, ``cifar100``); ``npz`` and ``imagefolder`` (a user's own data).

Importing the package imports every public module in it (the built-ins in that order,
their registration order, then any others alphabetically), so a new dataset is a new file
with a ``@register_dataset`` line (or a loader registered anywhere, e.g. a notebook cell).
"""

from __future__ import annotations

from fedaudit.data.datasets.base import DATASETS, Dataset, load_dataset, register_dataset
from fedaudit.registry import import_submodules

import_submodules(__name__, __path__,
                  first=("digits", "torchvision_sets", "npz", "imagefolder"))
DATASETS.mark_builtin()

# the loaders' public names, importable from here as before the split (after the import
# above, which registers them in order)
from fedaudit.data.datasets.digits import load_digits_dataset  # noqa: E402
from fedaudit.data.datasets.imagefolder import (  # noqa: E402
    IMAGE_SUFFIXES, load_imagefolder_dataset)
from fedaudit.data.datasets.npz import load_npz_dataset  # noqa: E402

__all__ = ["DATASETS", "IMAGE_SUFFIXES", "Dataset", "load_dataset", "load_digits_dataset",
           "load_imagefolder_dataset", "load_npz_dataset", "register_dataset"]
