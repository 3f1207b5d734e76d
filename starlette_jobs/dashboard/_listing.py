"""The job list's filters, read from the page's query string and written back into its links
(the "older" page keeps them, with `before=` the last id shown)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from urllib.parse import urlencode

from .._errors import JobDefinitionError
from .._options import check_queue_name
from .._records import JobStatus
from .._row_ids import MAX_ROW_ID
from .._since import SinceError, finished_after
from .._trace_ids import trace_id_filter

SCAN_WINDOW = 50_000
"""The most job ids one page of the list looks through when a filter no index serves is set
(a job name, a trace or correlation id, a queue without a status): a page walks the ids down
from the newest and keeps the matching ones, so a rare value would walk the whole table (0.4 s
a page at 1,000,000 jobs for a trace id, docs/dashboard.md). Past the window, the page ends
with a link to the next one."""


class FilterError(ValueError):
    """A filter of the list that names nothing a job can have: the page says which."""


@dataclass(frozen=True, slots=True)
class JobFilter:
    """The list's filters; None: not filtered on it."""

    status: JobStatus | None = None
    queue: str | None = None
    name: str | None = None
    before: int | None = None
    """Jobs older than this id: the next page."""
    trace_id: str | None = None
    correlation_id: str | None = None
    since: str | None = None
    """The time bound as given ("1h", an ISO time: `_since`), kept as text in links."""
    finished_after: datetime | None = None
    """The time `since` named when the page was asked for: jobs finished at or after it."""

    @classmethod
    def from_query(cls, params: Mapping[str, str]) -> JobFilter:
        """The filters of a query string; an empty field is no filter (a form sends them all).

        Raises:
            FilterError: an unknown status, a `before` that is no job id, a trace id that
                is no trace id, or a text field holding a NUL character.
        """
        status = params.get("status") or None
        if status is not None and status not in JobStatus.__members__.values():
            raise FilterError(f"no status is called {status!r}")
        try:
            trace_id = trace_id_filter(params.get("trace_id") or None)
        except ValueError as error:
            raise FilterError(str(error)) from None
        correlation_id = _text(params, "correlation_id")
        queue = _text(params, "queue")
        if queue is not None:
            try:
                check_queue_name(queue)
            except JobDefinitionError as error:  # no job has it; a bulk action would refuse it
                raise FilterError(str(error)[:200]) from None
        name = _text(params, "name")
        since = (params.get("since") or "").strip() or None
        try:
            bound = None if since is None else finished_after(since, datetime.now(UTC))
        except SinceError as error:
            raise FilterError(str(error)) from None
        return cls(
            status=None if status is None else JobStatus(status),
            queue=queue,
            name=name,
            before=job_id(params.get("before") or None, "before"),
            trace_id=trace_id,
            correlation_id=correlation_id,
            since=since,
            finished_after=bound,
        )

    def older(self, last_id: int) -> JobFilter:
        return replace(self, before=last_id)

    @property
    def windowed(self) -> bool:
        """A filter no index serves is set: each page looks through `SCAN_WINDOW` ids at
        most. A status has an index of its own (with a queue too); the others do not."""
        unindexed = (self.name, self.trace_id, self.correlation_id)
        return any(value is not None for value in unindexed) or (
            self.queue is not None and self.status is None
        )

    def window_floor(self, top: int) -> int | None:
        """The id a windowed page looks down to (exclusive), from `top` (exclusive), or None:
        the window reaches the first job."""
        floor = top - SCAN_WINDOW - 1
        return floor if floor > 0 else None

    def first_page(self) -> JobFilter:
        return replace(self, before=None)

    def query(self) -> str:
        """The query string of these filters (the ones set), for a link."""
        fields = {
            "status": None if self.status is None else self.status.value,
            "queue": self.queue,
            "name": self.name,
            "before": None if self.before is None else str(self.before),
            "trace_id": self.trace_id,
            "correlation_id": self.correlation_id,
            "since": self.since,
        }
        return urlencode({key: value for key, value in fields.items() if value is not None})


def _text(params: Mapping[str, str], field: str) -> str | None:
    """A text filter, None for an empty field.

    Raises:
        FilterError: a NUL character, which no PostgreSQL text holds (the query would fail).
    """
    text = params.get(field) or None
    if text is not None and "\x00" in text:
        raise FilterError(f"{field} cannot hold a NUL character, got {text!r}")
    return text


def job_id(text: str | None, field: str) -> int | None:
    """The job id in `text` (digits only), or None for no text.

    Raises:
        FilterError: text that no job id can be.
    """
    return row_id(text, field, "job")


def row_id(text: str | None, field: str, kind: str) -> int | None:
    """The id of a `kind` ("job", "workflow": a row's identity, digits only) in `text`, or
    None for no text.

    Raises:
        FilterError: text that no such id can be.
    """
    if text is None:
        return None
    text = text.strip()
    if not (text.isascii() and text.isdigit() and 1 <= int(text) <= MAX_ROW_ID):
        raise FilterError(f"{field} must be a {kind} id (a positive integer), got {text!r}")
    return int(text)
