"""Every mistake listed in tests/labs/mistakes.py fails its check with a message that names
it, never with the value to copy."""

from __future__ import annotations

import re

import pytest

from fedaudit.labs import LabCheckError

from tests.labs.mistakes import MISTAKES


@pytest.mark.parametrize("task, mistake, feed, pattern", MISTAKES,
                         ids=[f"{m[0]}: {m[1]}" for m in MISTAKES])
def test_each_listed_mistake_fails_with_a_message_naming_it(task, mistake, feed, pattern):
    with pytest.raises(LabCheckError, match=f"^Task {re.escape(task)}: ") as err:
        feed()
    assert re.search(pattern, str(err.value)), str(err.value)


@pytest.mark.parametrize("task, mistake, feed, pattern", MISTAKES,
                         ids=[f"{m[0]}: {m[1]}" for m in MISTAKES])
def test_no_failure_states_the_expected_value(task, mistake, feed, pattern):
    """A failure names a direction or a concept, never the number to copy (for the fake
    results above: fedaudit's AUCs, TPRs and counts)."""
    with pytest.raises(LabCheckError) as err:
        feed()
    text = str(err.value)
    for answer in ("0.5900", "0.7000", "0.6600", "0.6400", "0.0200", "0.1000", "expected"):
        assert answer not in text, text
