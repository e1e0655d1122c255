"""A scenario file of the user's own, with its .npz data beside it."""

from pathlib import Path

import numpy as np


def write_npz(path: Path, n: int = 120) -> None:
    """``n`` 8x8 images of 3 classes as an .npz file (x, y)."""
    rng = np.random.default_rng(0)
    y = np.arange(n) % 3
    x = (rng.random((n, 8, 8)) * 0.3 + y[:, None, None] / 3).clip(0, 1).astype(np.float32)
    np.savez(path, x=x, y=y)


def write_scenario_file(folder: Path) -> Path:
    """``folder``/mine.toml: a two-client, one-round scenario whose data path (mine.npz,
    written beside it) is relative to the file."""
    folder.mkdir()
    write_npz(folder / "mine.npz")
    toml = folder / "mine.toml"
    toml.write_text('[scenario]\nname = "mine"\n[data]\ndataset = "npz"\npath = "mine.npz"\n'
                    '[federation]\nnum_clients = 2\nrounds = 1\n'
                    '[audit.quantization]\nquantizers = ["fp32", "int4"]\n'
                    '[attack]\nmethods = ["loss"]\n')
    return toml
