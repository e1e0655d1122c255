"""Run directories: creation under ``--out`` and crash-safe (atomic) writes.

Every file is written to a temporary sibling and moved into place with ``os.replace``, so
a crash leaves either the old or the new version, never half a file.
"""

from __future__ import annotations

import contextlib
import io
import json
import math
import os
import tempfile
import time
from pathlib import Path
from typing import Any, Iterator

import numpy as np

from fedaudit.rundir.layout import CHECKPOINTS_DIR


def create_unique_dir(out: str | os.PathLike, stem: str) -> Path:
    """A new folder ``out/<stem>-<YYYYmmdd-HHMMSS>`` (a numeric suffix when that exists
    already); created atomically, so two runs never share one."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    for n in range(1000):
        path = out / (f"{stem}-{stamp}" + (f"-{n}" if n else ""))
        try:
            path.mkdir()
        except FileExistsError:
            continue
        return path
    raise RuntimeError(f"cannot create a new folder for {stem!r} under {out}")


def create_run_dir(out: str | os.PathLike, name: str) -> Path:
    """A run directory ``out/<name>-<timestamp>`` with its ``checkpoints/`` folder."""
    path = create_unique_dir(out, name)
    (path / CHECKPOINTS_DIR).mkdir()
    return path


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


_MODE = 0o666 & ~_umask()  # what open() would give; mkstemp alone gives 0600


def _atomic_bytes(path: Path, data: bytes) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        os.fchmod(fd, _MODE)
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def atomic_write_bytes(path: str | os.PathLike, data: bytes) -> None:
    """Write ``data`` to ``path`` through a temporary file in its folder: a reader sees the
    old file or the whole new one, never a part."""
    _atomic_bytes(Path(path), data)


def atomic_write_text(path: str | os.PathLike, text: str) -> None:
    _atomic_bytes(Path(path), text.encode("utf-8"))


def json_safe(obj: Any) -> Any:
    """Numpy scalars to Python, non-finite floats to the strings 'inf', '-inf', 'nan'
    (JSON has no infinity)."""
    if isinstance(obj, dict):
        return {str(k): json_safe(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [json_safe(v) for v in obj]
    if isinstance(obj, np.ndarray):
        return json_safe(obj.tolist())
    if isinstance(obj, np.generic):
        obj = obj.item()
    if isinstance(obj, float) and not math.isfinite(obj):
        return "nan" if math.isnan(obj) else ("inf" if obj > 0 else "-inf")
    return obj


def atomic_write_json(path: str | os.PathLike, obj: Any) -> None:
    atomic_write_text(path, json.dumps(json_safe(obj), indent=2, allow_nan=False) + "\n")


def atomic_save_npz(path: str | os.PathLike, **arrays: np.ndarray) -> None:
    buf = io.BytesIO()
    np.savez_compressed(buf, **arrays)
    _atomic_bytes(Path(path), buf.getvalue())


def atomic_torch_save(obj: Any, path: str | os.PathLike) -> None:
    import torch

    buf = io.BytesIO()
    torch.save(obj, buf)
    _atomic_bytes(Path(path), buf.getvalue())


def load_checkpoint(path: str | os.PathLike) -> dict:
    """A checkpoint's state_dict; never unpickles code (``weights_only=True``)."""
    import torch

    return torch.load(path, map_location="cpu", weights_only=True)


def append_jsonl(path: str | os.PathLike, obj: Any) -> None:
    """Append one line durably.  A crash mid-line leaves a partial last line, which
    :func:`read_jsonl` ignores."""
    line = json.dumps(json_safe(obj), allow_nan=False) + "\n"
    with open(path, "a", encoding="utf-8") as fh:
        fh.write(line)
        fh.flush()
        os.fsync(fh.fileno())


def read_jsonl(path: str | os.PathLike) -> list[dict]:
    rows = []
    p = Path(path)
    if not p.exists():
        return rows
    for line in p.read_text(encoding="utf-8").splitlines():
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError:
            break  # a torn last line from a crash
    return rows


def cache_root() -> Path:
    """``$FEDAUDIT_CACHE``, else ``$XDG_CACHE_HOME/fedaudit``, else ``~/.cache/fedaudit``."""
    if os.environ.get("FEDAUDIT_CACHE"):
        return Path(os.environ["FEDAUDIT_CACHE"]).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base).expanduser() / "fedaudit"


@contextlib.contextmanager
def using_cache(folder: str | os.PathLike | None) -> Iterator[None]:
    """Within the block, :func:`cache_root` is ``folder`` (absolute; None: unchanged);
    ``FEDAUDIT_CACHE`` is restored afterwards (``--cache DIR``, ``fedaudit.run(cache=)``)."""
    if folder is None:
        yield
        return
    saved = os.environ.get("FEDAUDIT_CACHE")
    os.environ["FEDAUDIT_CACHE"] = str(Path(folder).expanduser().resolve())
    try:
        yield
    finally:
        if saved is None:
            os.environ.pop("FEDAUDIT_CACHE", None)
        else:
            os.environ["FEDAUDIT_CACHE"] = saved

