"""Dataset loaders: every loader returns images as float32 (N, C, H, W) in [0, 1] and
int64 labels; the position of a sample in these arrays is its global sample id."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np

from fedaudit.config import ScenarioError


@dataclass(frozen=True)
class Dataset:
    name: str
    x: np.ndarray  # float32 (N, C, H, W) in [0, 1]
    y: np.ndarray  # int64 (N,)
    classes: tuple[str, ...]

    @property
    def num_classes(self) -> int:
        return len(self.classes)

    @property
    def shape(self) -> tuple[int, int, int]:
        return tuple(self.x.shape[1:])  # type: ignore[return-value]


LOADERS: dict[str, Callable[[dict], Dataset]] = {}


def register_dataset(name: str):
    def deco(fn: Callable[[dict], Dataset]) -> Callable[[dict], Dataset]:
        LOADERS[name] = fn
        return fn
    return deco


@register_dataset("digits")
def load_digits_dataset(cfg: dict) -> Dataset:
    """scikit-learn's bundled 8x8 handwritten digits (1,797 samples, offline)."""
    from sklearn.datasets import load_digits

    bunch = load_digits()
    x = (bunch.images.astype(np.float32) / 16.0)[:, None, :, :]
    return Dataset("digits", x, bunch.target.astype(np.int64), tuple(str(c) for c in range(10)))


_TORCHVISION = {
    # name: (torchvision class, folder torchvision looks in, files it needs)
    "mnist": ("MNIST", "MNIST/raw", ("train-images-idx3-ubyte", "t10k-images-idx3-ubyte")),
    "fashion-mnist": ("FashionMNIST", "FashionMNIST/raw",
                      ("train-images-idx3-ubyte", "t10k-images-idx3-ubyte")),
    "cifar10": ("CIFAR10", "cifar-10-batches-py", ("data_batch_1", "test_batch")),
    "cifar100": ("CIFAR100", "cifar-100-python", ("train", "test")),
}


def _load_torchvision(name: str, cfg: dict) -> Dataset:
    import torchvision

    cls_name, folder, files = _TORCHVISION[name]
    root = Path(cfg["data_dir"]).expanduser()
    cls = getattr(torchvision.datasets, cls_name)
    parts = []
    for train in (True, False):
        try:
            parts.append(cls(root=str(root), train=train, download=cfg["download"]))
        except RuntimeError as exc:
            # torchvision raises RuntimeError("Dataset not found ...") when offline/missing
            expected = ", ".join(str(root / folder / f) for f in files)
            raise ScenarioError(
                f"data.dataset = {name!r}: not found under data.data_dir = {str(root)!r} "
                f"(expected {expected} ...); put the files there or set data.download = true"
                + (f" ({exc})" if cfg["download"] else "")) from None
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


@register_dataset("npz")
def load_npz_dataset(cfg: dict) -> Dataset:
    """A user's own data: ``x`` (N,H,W or N,C,H,W; uint8 in 0..255 or float in [0,1]),
    ``y`` (N,) integer labels, optional ``classes`` (names)."""
    path = Path(cfg["path"]).expanduser()
    where = f"data.path = {str(path)!r}"
    if not path.is_file():
        raise ScenarioError(f"{where}: no such file")
    try:
        with np.load(path, allow_pickle=False) as npz:
            arrays = {k: npz[k] for k in npz.files}
    except Exception as exc:  # noqa: BLE001 - any unreadable file is the user's input error
        raise ScenarioError(f"{where}: not a readable .npz file ({type(exc).__name__})") from None
    missing = [k for k in ("x", "y") if k not in arrays]
    if missing:
        raise ScenarioError(f"{where}: missing array {missing[0]!r}; the file must hold 'x' "
                            "(N,H,W or N,C,H,W) and 'y' (N,) integer labels")
    x, y = arrays["x"], arrays["y"]
    if x.ndim == 3:
        x = x[:, None]
    if x.ndim != 4 or x.shape[1] not in (1, 3):
        raise ScenarioError(f"{where}: 'x' has shape {arrays['x'].shape}; expected (N,H,W) or "
                            "(N,C,H,W) with C = 1 or 3")
    if y.ndim != 1 or len(y) != len(x):
        raise ScenarioError(f"{where}: 'y' has shape {y.shape}; expected ({len(x)},)")
    if not np.issubdtype(y.dtype, np.integer):
        raise ScenarioError(f"{where}: 'y' has dtype {y.dtype}; expected integer labels")
    if len(y) and y.min() < 0:
        raise ScenarioError(f"{where}: 'y' has negative labels; expected 0..num_classes-1")
    if x.dtype == np.uint8:
        x = x.astype(np.float32) / 255.0
    elif np.issubdtype(x.dtype, np.floating):
        if not np.all(np.isfinite(x)):
            raise ScenarioError(f"{where}: 'x' has non-finite values")
        if x.min() < 0.0 or x.max() > 1.0:
            raise ScenarioError(f"{where}: float 'x' must lie in [0, 1] (found "
                                f"{x.min():g}..{x.max():g}); store uint8 or rescale")
        x = x.astype(np.float32)
    else:
        raise ScenarioError(f"{where}: 'x' has dtype {x.dtype}; expected uint8 or float")
    num_classes = int(y.max()) + 1 if len(y) else 0
    if "classes" in arrays:
        classes = tuple(str(c) for c in arrays["classes"])
        if len(classes) < num_classes:
            raise ScenarioError(f"{where}: 'classes' names {len(classes)} classes but 'y' "
                                f"uses labels up to {num_classes - 1}")
    else:
        classes = tuple(str(c) for c in range(num_classes))
    if len(classes) < 2:
        raise ScenarioError(f"{where}: needs at least 2 classes")
    return Dataset(path.stem, np.ascontiguousarray(x), y.astype(np.int64), classes)


def load_dataset(cfg: dict) -> Dataset:
    """Load the dataset named by a resolved ``[data]`` table."""
    return LOADERS[cfg["dataset"]](cfg)
