"""``npz``: a user's own data in one .npz file (``data.path``)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from fedaudit.data.datasets.base import Dataset, register_dataset
from fedaudit.errors import ScenarioError
from fedaudit.scenario import DataConfig


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
