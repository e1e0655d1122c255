"""results.json compared across runs that must give the same numbers."""

import json


def result_numbers(res: dict) -> str:
    """results.json as canonical JSON without what may differ between identical runs
    (timings and the run directory)."""
    res = json.loads(json.dumps(res, default=str))
    for key in ("timing", "run_dir"):
        res.pop(key, None)
    for m in res.get("attacks", {}).values():
        m.pop("seconds_per_sample", None)
    for q in res.get("quantization", []):
        for m in q["attacks"].values():
            m.pop("seconds_per_sample", None)
    return json.dumps(res, sort_keys=True)
