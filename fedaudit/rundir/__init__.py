"""Run directories: their layout in one place (:mod:`~fedaudit.rundir.layout`), crash-safe
writes (:mod:`~fedaudit.rundir.files`), the clients' models the server keeps
(:mod:`~fedaudit.rundir.client_models`), run.log (:mod:`~fedaudit.rundir.runlog`) and
reading a finished run (:mod:`~fedaudit.rundir.reading`, imported on its own: it is not
needed while training)."""

from fedaudit.rundir.files import (append_jsonl, atomic_save_npz, atomic_torch_save,
                                   atomic_write_json, atomic_write_text, cache_root,
                                   create_run_dir, create_unique_dir, json_safe,
                                   load_checkpoint, read_jsonl, using_cache)
from fedaudit.rundir.layout import checkpoint_path

__all__ = ["append_jsonl", "atomic_save_npz", "atomic_torch_save", "atomic_write_json",
           "atomic_write_text", "cache_root", "checkpoint_path", "create_run_dir",
           "create_unique_dir", "json_safe", "load_checkpoint", "read_jsonl", "using_cache"]
