"""Dataset loaders: every loader returns images as float32 (N, C, H, W) in [0, 1] and
int64 labels; the position of a sample in these arrays is its global sample id."""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np

from fedaudit.errors import ScenarioError
from fedaudit.registry import Registry
from fedaudit.scenario import DataConfig


@dataclass(frozen=True)
class Dataset:
    name: str
    x: np.ndarray  # float32 (N, C, H, W) in [0, 1]
    y: np.ndarray  # int64 (N,)
    classes: tuple[str, ...]
    #: what the loader wants the user to know (e.g. skipped files): logged to the run's
    #: run.log and listed in results.json ``warnings``
    notes: tuple[str, ...] = ()

    @property
    def num_classes(self) -> int:
        return len(self.classes)

    @property
    def shape(self) -> tuple[int, int, int]:
        return tuple(self.x.shape[1:])  # type: ignore[return-value]


#: name -> loader ``fn(data_cfg: DataConfig) -> Dataset`` (``data_cfg``: the scenario's
#: ``[data]`` table); the scenario's ``data.dataset`` choices come from here.
DATASETS: Registry[str, Callable[[DataConfig], Dataset]] = Registry(
    "dataset", name_pattern=r"[a-z0-9][a-z0-9_.-]*")


def register_dataset(name: str, *, replace: bool = False, **meta):
    """Decorator: register a loader ``fn(data_cfg) -> Dataset`` under ``name``;
    ``needs_path=True`` makes ``data.path`` required for it."""
    return DATASETS.register(name, replace=replace, **meta)


@register_dataset("digits")
def load_digits_dataset(cfg: DataConfig) -> Dataset:
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


@register_dataset("npz", needs_path=True)
def load_npz_dataset(cfg: DataConfig) -> Dataset:
    """A user's own data: ``x`` (N,H,W or N,C,H,W; uint8 in 0..255 or float in [0,1]),
    ``y`` (N,) integer labels, optional ``classes`` (names)."""
    path = Path(cfg.path).expanduser()
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


IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".bmp", ".gif", ".webp")
_GRAY_MODES = ("1", "L", "LA", "I", "I;16", "I;16L", "I;16B", "I;16N")


def _image_files(folder: Path) -> list[Path]:
    """Image files under a class folder (subfolders included), hidden entries skipped,
    sorted by their path relative to the class folder."""
    found = []
    for root, dirs, files in os.walk(folder):
        dirs[:] = [d for d in dirs if not d.startswith(".")]
        found += [Path(root, f) for f in files
                  if not f.startswith(".") and f.lower().endswith(IMAGE_SUFFIXES)]
    return sorted(found, key=lambda f: f.relative_to(folder).as_posix())


def _read_image(file: Path, size: int) -> tuple[np.ndarray, tuple[int, int]]:
    """One image as float32 (C, H, W) in [0, 1] with C = 1 (grayscale) or 3, and its size
    in the file (width, height)."""
    from PIL import Image

    with Image.open(file) as im:
        im.load()
        original = im.size
        if im.mode in ("I", "I;16", "I;16L", "I;16B", "I;16N"):
            # 16-bit grayscale: Pillow's convert("L") would clip at 255, so scale instead
            arr = np.clip(np.asarray(im, dtype=np.float32) / 65535.0, 0.0, 1.0)
            if size:
                arr = np.asarray(Image.fromarray(arr).resize(
                    (size, size), Image.Resampling.BILINEAR), dtype=np.float32)
            return arr[None], original
        gray = im.mode in _GRAY_MODES
        im = im.convert("L" if gray else "RGB")
        if size:
            im = im.resize((size, size), Image.Resampling.BILINEAR)
        arr = np.asarray(im, dtype=np.float32) / 255.0
    return (arr[None] if gray else arr.transpose(2, 0, 1)), original


@register_dataset("imagefolder", needs_path=True)
def load_imagefolder_dataset(cfg: DataConfig) -> Dataset:
    """A user's own images laid out like torchvision's ImageFolder: ``path/<class>/<file>``.

    Classes are the sorted names of the non-hidden subfolders of ``path`` (labels 0..C-1 in
    that order); a class holds the .png .jpg .jpeg .bmp .gif .webp files (any case) under its
    folder, subfolders included; other and hidden files and folders are ignored, and so are
    files directly in ``path``.  Samples are ordered by class, then by file path within the
    class, so the global sample ids are stable.  Images become grayscale (one channel) when
    every image is grayscale (modes 1, L, LA, I, I;16; 16-bit ones are scaled by 1/65535),
    otherwise RGB (alpha dropped; a GIF gives its first frame).  With ``data.image_size`` > 0
    every image is resized to that square (bilinear); without it all images must be the same
    size.

    Decision: files that Pillow cannot read (corrupt, truncated, not an image despite the
    suffix) are skipped, and their count is logged as a warning on the ``fedaudit`` logger
    (``fedaudit validate`` / ``run`` print it before the run starts) and kept in
    :attr:`Dataset.notes`, which a run writes to run.log and results.json ``warnings``.  A class whose files
    are all unreadable is empty, which is an error like any empty class."""
    path = Path(cfg.path).expanduser()
    size = cfg.image_size
    where = f"data.path = {str(path)!r}"
    if not path.exists():
        raise ScenarioError(f"{where}: no such folder")
    if not path.is_dir():
        raise ScenarioError(f"{where}: not a folder; dataset = 'imagefolder' needs a folder "
                            "with one subfolder of images per class")
    classes = tuple(sorted(e.name for e in path.iterdir()
                           if e.is_dir() and not e.name.startswith(".")))
    if len(classes) < 2:
        raise ScenarioError(f"{where}: found {len(classes)} class subfolder(s) "
                            f"({', '.join(classes) or 'none'}); needs at least 2, one per class")
    xs: list[np.ndarray] = []
    ys: list[int] = []
    first: tuple[Path, tuple[int, int]] | None = None
    skipped: list[tuple[Path, str]] = []
    for label, name in enumerate(classes):
        files = _image_files(path / name)
        if not files:
            raise ScenarioError(f"{where}: class folder {name!r} has no image files "
                                f"({' '.join(IMAGE_SUFFIXES)})")
        read = 0
        for file in files:
            try:
                arr, original = _read_image(file, size)
            except Exception as exc:  # noqa: BLE001 - any unreadable file is skipped (docstring)
                skipped.append((file, type(exc).__name__))
                continue
            if first is None:
                first = (file, original)
            elif not size and original != first[1]:
                a, b = first
                raise ScenarioError(
                    f"{where}: images differ in size: {str(a.relative_to(path))!r} is "
                    f"{b[0]}x{b[1]}, {str(file.relative_to(path))!r} is "
                    f"{original[0]}x{original[1]}; set data.image_size to resize them all")
            xs.append(arr)
            ys.append(label)
            read += 1
        if not read:
            raise ScenarioError(f"{where}: class folder {name!r} has no readable image files "
                                f"({len(files)} unreadable)")
    notes: tuple[str, ...] = ()
    if skipped:
        file, why = skipped[0]
        notes = (f"{where}: skipped {len(skipped)} unreadable image file(s), e.g. "
                 f"{str(file.relative_to(path))!r} ({why})",)
        logging.getLogger("fedaudit").warning("%s", notes[0])
    if any(a.shape[0] == 3 for a in xs):
        xs = [np.repeat(a, 3, axis=0) if a.shape[0] == 1 else a for a in xs]
    x = np.ascontiguousarray(np.stack(xs), dtype=np.float32)
    return Dataset(path.resolve().name or "imagefolder", x, np.asarray(ys, dtype=np.int64),
                   classes, notes)


def load_dataset(cfg: DataConfig) -> Dataset:
    """Load the dataset named by a resolved ``[data]`` table."""
    return DATASETS.get(cfg.dataset)(cfg)


DATASETS.mark_builtin()
