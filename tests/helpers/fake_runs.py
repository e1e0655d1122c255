"""Fake finished runs: a run directory with a results.json holding the keys ``fedaudit
compare`` and the report read, no training."""

from __future__ import annotations

import json
from pathlib import Path


QUANTIZERS = ["fp32", "int8", "int4", "int2", "ternary", "ternary-sparse50", "ternary-sparse90",
              "binary"]
METHODS = ["resmia", "loss", "confidence", "entropy", "mentropy"]


def _attacks(base: float) -> dict:
    return {m: {"auc": round(base + 0.011 * i, 4), "tpr_at_1pct_fpr": round(0.02 + 0.003 * i, 4),
                "fpr_at_80pct_tpr": 0.5} for i, m in enumerate(METHODS)}


def write_fake_run(run_dir: Path, scenario: str = "quickstart-defended", *,
                   defense: str | None = None, epsilon: float | str | None = None,
                   quantizers: list[str] = QUANTIZERS, scen: dict | None = None) -> Path:
    """A finished run directory as far as ``compare`` is concerned."""
    (run_dir / "checkpoints").mkdir(parents=True, exist_ok=True)
    scen = dict(scen or {"scenario": {"name": scenario}})
    if defense:
        scen["defense"] = {"kind": defense}
    res = {"scenario": scen, "model": {"test_accuracy": 0.9123, "test_loss": 0.31},
           "rounds": [{"round": 1}], "attacks": _attacks(0.61),
           "quantization": [{"quantizer": q, "bits": 4, "test_accuracy": 0.9 - 0.01 * i,
                             "rqn": "inf" if q == "binary" else 1.5 + i,
                             "attacks": _attacks(0.55 - 0.004 * i)}
                            for i, q in enumerate(quantizers)]}
    if defense:
        res["defense"] = {"kind": defense, "epsilon": epsilon}
    (run_dir / "results.json").write_text(json.dumps(res, default=str), encoding="utf-8")
    return run_dir
