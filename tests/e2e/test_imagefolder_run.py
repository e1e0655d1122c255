"""A run (Flower + Ray) on an image folder with an unreadable file: the loader's warning
reaches run.log and results.json."""

import numpy as np

from tests.helpers.images import write_png


def test_imagefolder_skipped_files_reach_run_log_and_results(tmp_path):
    """The loader's warning is printed at validation, and a run keeps it (run.log and
    results.json warnings) although its data comes from the validation's cache."""
    import fedaudit

    rng = np.random.default_rng(2)
    for i in range(40):
        write_png(tmp_path / "imgs" / f"c{i % 2}" / f"{i:02d}.png",
             rng.integers(0, 256, (8, 8), dtype=np.uint8))
    (tmp_path / "imgs" / "c0" / "broken.png").write_bytes(b"not an image")
    run = fedaudit.run({"data": {"dataset": "imagefolder", "path": str(tmp_path / "imgs")},
                        "federation": {"num_clients": 2, "rounds": 1},
                        "audit.quantization": {"enabled": False},
                        "attack": {"methods": ["loss"]}},
                       out=tmp_path / "runs", progress=False)
    notes = [w for w in run.results["warnings"] if w["round"] is None]
    assert len(notes) == 1 and "skipped 1 unreadable image file" in notes[0]["message"]
    assert "broken.png" in notes[0]["message"]
    assert "skipped 1 unreadable image file" in (run.dir / "run.log").read_text()
