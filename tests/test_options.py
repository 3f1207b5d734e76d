"""Per-call options (`_options.py`): what `configure` refuses before anything is written. The
table of every refused input, through the public API, is integration/test_bad_input.py."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from starlette_jobs import JobDefinitionError
from starlette_jobs._options import EnqueueOptions, check_priority, check_queue_name


def test_the_defaults_ask_for_nothing() -> None:
    options = EnqueueOptions()
    assert (options.unique_key, options.idempotency_key, options.on_success) == (None, None, False)
    assert options.connection is None


@pytest.mark.parametrize("option", ["unique_key", "idempotency_key"])
@pytest.mark.parametrize(
    ("key", "message"),
    [("", "must be 1 to 512 characters, got 0"), ("k" * 513, "got 513"), ("a\x00b", "NUL")],
)
def test_keys_are_refused_by_name(option: str, key: str, message: str) -> None:
    with pytest.raises(JobDefinitionError, match=f"^{option} ") as refused:
        EnqueueOptions(**{option: key})  # type: ignore[arg-type]
    assert message in str(refused.value)
    assert EnqueueOptions(**{option: "k" * 512})  # type: ignore[arg-type]


def test_on_success_and_a_transaction_exclude_each_other() -> None:
    with pytest.raises(JobDefinitionError, match=r"either on_success=True .* or connection="):
        EnqueueOptions(on_success=True, connection=object())  # type: ignore[arg-type]
    assert EnqueueOptions(on_success=True, idempotency_key="k", unique_key="u").on_success


def test_delay_and_run_at_exclude_each_other() -> None:
    with pytest.raises(JobDefinitionError, match="either delay or run_at"):
        EnqueueOptions(delay=1, run_at=datetime.now(UTC))


def test_queue_names_and_priorities_are_checked() -> None:
    assert check_queue_name("emails.v2") == "emails.v2"
    with pytest.raises(JobDefinitionError, match="invalid queue name"):
        check_queue_name("a b")
    assert check_priority(-(2**31)) == -(2**31)
    with pytest.raises(JobDefinitionError, match="32-bit"):
        check_priority(True)
