"""``imagefolder``: a user's own images, one subfolder per class (``data.path``), laid out
like torchvision's ImageFolder."""

from __future__ import annotations

import logging
import os
from pathlib import Path

import numpy as np

from fedaudit.data.datasets.base import Dataset, register_dataset
from fedaudit.errors import ScenarioError
from fedaudit.options import option
from fedaudit.scenario import DataConfig


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


#: imagefolder's own key of the scenario's ``[data]`` table (``cfg.image_size``)
OPTIONS = {
    "image_size": option(int, 0, "imagefolder: resize every image to this many pixels square "
                                 "(bilinear); 0 = keep the files' size", min=0),
}


@register_dataset("imagefolder", needs_path=True, options=OPTIONS)
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
