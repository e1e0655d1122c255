"""Recording what each audit stage and target kind writes to results.json during real runs
(tests/e2e/test_stage_writes_runs.py and the runs it shares with other e2e tests), and the
settings of the shared malicious-server run (tests/e2e/conftest.py)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

#: the malicious server on the digits: 4 clients of 4 samples, one SGD step, 64 bins
MALICIOUS_SMALL = ["data.dataset=digits", "data.client_samples=4", "train.batch_size=4",
                   "federation.num_clients=4", "federation.secagg.num_shares=3",
                   "federation.secagg.reconstruction_threshold=2", "imprint.bins=64"]


@contextmanager
def recording_writes(into: dict[str, set[str]] | None = None) -> Iterator[dict[str, set[str]]]:
    """Within the block, every run's write checks also record ``who`` (an audit stage, a
    target kind) -> the paths it wrote, in ``into`` (a new dict by default)."""
    from fedaudit.audit.stages import attacks, base

    seen: dict[str, set[str]] = defaultdict(set) if into is None else into

    def recording(check):
        def wrapped(who, declared, before, after):
            written = check(who, declared, before, after)
            seen[who].update(written)
            return written
        return wrapped

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(base, "check_writes", recording(base.check_writes))
        mp.setattr(attacks, "check_writes", recording(attacks.check_writes))
        yield seen
