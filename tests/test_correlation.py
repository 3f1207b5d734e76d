"""The correlation id (`_correlation`): current within a scope. The middleware that sets it from
`X-Request-ID` is tested in web/test_correlation.py; that it travels with a job to its worker,
in integration/test_tracing.py."""

from __future__ import annotations

from starlette_jobs import correlation_id
from starlette_jobs._correlation import correlation_scope


def test_outside_a_request_or_job_there_is_none() -> None:
    assert correlation_id() is None


def test_a_scope_makes_its_value_current_and_restores_the_one_before() -> None:
    with correlation_scope("outer"):
        assert correlation_id() == "outer"
        with correlation_scope(None):
            assert correlation_id() is None
        with correlation_scope("inner"):
            assert correlation_id() == "inner"
        assert correlation_id() == "outer"
    assert correlation_id() is None


def test_what_postgresql_cannot_store_is_kept_as_escapes() -> None:
    with correlation_scope("a\x00b\udc80c"):
        value = correlation_id()
    assert value is not None
    assert "\x00" not in value
    assert "\udc80" not in value
    value.encode("utf-8")  # storable as text
    assert value.startswith("a")
    assert value.endswith("c")
