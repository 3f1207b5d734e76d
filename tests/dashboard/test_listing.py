"""The job list's filters: read from a query string, written back into the list's links."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from urllib.parse import parse_qsl

import pytest
from hypothesis import given
from hypothesis import strategies as st

from starlette_jobs import JobStatus
from starlette_jobs.dashboard._listing import FilterError, JobFilter


def test_empty_fields_filter_nothing() -> None:
    assert (
        JobFilter.from_query({"status": "", "queue": "", "name": "", "before": ""}) == JobFilter()
    )


def test_each_field_is_read() -> None:
    query = {"status": "failed", "queue": "emails", "name": "app.send", "before": " 42 "}
    assert JobFilter.from_query(query) == JobFilter(JobStatus.FAILED, "emails", "app.send", 42)


@pytest.mark.parametrize(
    ("query", "message"),
    [
        ({"status": "FAILED"}, "no status is called 'FAILED'"),
        ({"before": "0"}, "before must be a job id"),
        ({"before": "9223372036854775808"}, "before must be a job id"),
        ({"before": "\uff11\uff12"}, "before must be a job id"),  # full-width digits: no id
        # PostgreSQL text holds no NUL: such a filter is the page's 400, not the database's 500.
        ({"queue": "a\x00"}, "queue cannot hold a NUL character"),
        ({"name": "\x00"}, "name cannot hold a NUL character"),
        ({"correlation_id": "x\x00y"}, "correlation_id cannot hold a NUL character"),
    ],
)
def test_what_no_job_can_have_is_refused(query: dict[str, str], message: str) -> None:
    with pytest.raises(FilterError, match=message):
        JobFilter.from_query(query)


def test_the_older_page_keeps_the_filters_and_the_first_page_drops_before() -> None:
    filters = JobFilter(status=JobStatus.PENDING, name="a b&c")
    older = filters.older(17)
    assert older.query() == "status=pending&name=a+b%26c&before=17"
    assert older.first_page() == filters


# Any text a filter can hold: all but NUL, which no PostgreSQL text holds (refused above).
_FILTER_TEXT = st.characters(codec="utf-8", exclude_characters="\x00")


@given(
    status=st.none() | st.sampled_from(list(JobStatus)),
    queue=st.none() | st.from_regex(r"[A-Za-z0-9_.\-]{1,48}", fullmatch=True),
    name=st.none() | st.text(_FILTER_TEXT, min_size=1),
    before=st.none() | st.integers(1, 2**63 - 1),
)
def test_a_filter_read_back_from_its_link_is_itself(
    status: JobStatus | None, queue: str | None, name: str | None, before: int | None
) -> None:
    filters = JobFilter(status, queue, name, before)
    assert JobFilter.from_query(dict(parse_qsl(filters.query()))) == filters


def test_since_is_read_as_a_time_and_kept_as_given_in_links() -> None:
    iso = JobFilter.from_query({"since": "2026-11-26T06:00:00+01:00", "status": "failed"})
    assert iso.finished_after == datetime(2026, 11, 26, 5, 0, tzinfo=UTC)
    before = datetime.now(UTC)
    hour = JobFilter.from_query({"since": " 1h ", "queue": "emails"})
    assert hour.finished_after is not None
    assert before - timedelta(hours=1) <= hour.finished_after <= datetime.now(UTC)
    assert hour.older(7).query() == "queue=emails&before=7&since=1h"  # the next page: still 1h
    assert JobFilter.from_query({"since": ""}) == JobFilter()


@pytest.mark.parametrize("since", ["yesterday", "-1h", "1h'--", "999999999w", "x" * 5000])
def test_a_since_that_is_neither_an_age_nor_a_time_is_refused(since: str) -> None:
    with pytest.raises(FilterError, match="since must be"):
        JobFilter.from_query({"since": since})
