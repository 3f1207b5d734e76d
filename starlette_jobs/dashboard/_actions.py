"""The dashboard's actions: retry, cancel and release a job, pause and resume a queue. Each is a
POST form, checked against CSRF (`_csrf.py`), then allowed or refused by the user's
`authorize(request, action, queue)` hook; without a hook the dashboard is read-only. What is
done is logged, with who did it (what the hook returned, when it is a name); a job's change is
also written, with that name, in the job's events (`JobEvent.by`), its audit trail. A queue has
no events: its pause and resume are in the log only."""

from __future__ import annotations

import inspect
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from urllib.parse import parse_qsl, urlencode

from starlette.requests import Request

from .._errors import JobDefinitionError, JobNotFoundError, UniqueKeyTakenError
from .._jobs import Jobs
from .._options import check_queue_name
from .._records import JobRecord, JobStatus
from .._storable import storable
from ._csrf import FIELD, CsrfTokens
from ._listing import FilterError, job_id

logger = logging.getLogger("starlette_jobs.dashboard")

Authorize = Callable[[Request, str, str], "bool | str | Awaitable[bool | str]"]
"""`authorize(request, action, queue)`: True or the name of whoever asks (recorded in the log)
to allow the action on the queue, False to refuse it."""

JOB_ACTIONS = ("retry", "cancel", "release")
QUEUE_ACTIONS = ("pause", "resume")

_WHEN = {
    "retry": frozenset({JobStatus.FAILED, JobStatus.CANCELLED}),
    "cancel": frozenset({JobStatus.PENDING, JobStatus.RUNNING, JobStatus.WAITING}),
    "release": frozenset({JobStatus.RUNNING}),
}


def job_actions(record: JobRecord) -> list[str]:
    """The actions the job's status allows, for its page's buttons."""
    return [action for action in JOB_ACTIONS if record.status in _WHEN[action]]


class Refused(Exception):
    """An action not done: `status` and `message` are the page's answer."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


@dataclass(frozen=True, slots=True)
class Done:
    """An action done, or left undone by the job's status: where to go back to."""

    location: str


class Actions:
    """Runs the actions of the POSTs that pass the CSRF check and the hook."""

    def __init__(self, jobs: Jobs, authorize: Authorize | None, tokens: CsrfTokens) -> None:
        self._jobs = jobs
        self._authorize = authorize
        self._tokens = tokens

    @property
    def enabled(self) -> bool:
        return self._authorize is not None

    async def _who(self, request: Request, action: str, queue: str) -> str:
        """Who may do `action` on `queue`, after the checks.

        Raises:
            Refused: the dashboard is read-only, the form's token does not match its cookie,
                or the hook refuses.
        """
        if self._authorize is None:
            raise Refused(403, "this dashboard is read-only: no authorize hook is set")
        form = dict(parse_qsl((await request.body()).decode("utf-8", "replace")))
        if not self._tokens.accepts(request, form.get(FIELD)):
            raise Refused(403, "the form has expired or was not sent from this dashboard")
        answer = self._authorize(request, action, queue)
        if inspect.isawaitable(answer):
            answer = await answer
        if answer is True:
            return "someone authorize allowed"
        if isinstance(answer, str) and answer:
            # Written in the job's events: a NUL or a lone surrogate (the app's text, from a
            # header or a token) kept as escapes, not PostgreSQL's refusal after the checks.
            return storable(answer)
        # False, and anything else (None, an empty name): refusing is the safe reading.
        raise Refused(403, f"you may not {action} on queue {queue!r}")

    async def allowed(self, request: Request, action: str, queue: str) -> str:
        """Who may do `action` on `queue` (the bulk actions' check, `_bulk.py`).

        Raises:
            Refused: as `_who`.
        """
        return await self._who(request, action, queue)

    async def on_job(self, request: Request, base: str, action: str, text: str) -> Done:
        try:
            row_id = job_id(text, "the job id")
        except FilterError:
            row_id = None
        record = None if row_id is None else await self._jobs.get(row_id)
        if record is None:
            raise Refused(404, f"no job {text}")
        who = await self._who(request, action, record.queue)
        change = {"retry": self._jobs.retry, "cancel": self._jobs.cancel}.get(
            action, self._jobs.release
        )
        try:
            changed = await change(record.id, by=who)
        except JobNotFoundError:
            raise Refused(404, f"no job {record.id}") from None
        except UniqueKeyTakenError as error:
            raise Refused(409, str(error)) from None
        outcome = "changed" if changed else "unchanged"
        logger.info("dashboard: %s: %s job %s: %s", who, action, record.id, outcome)
        query = urlencode({"action": action, "outcome": outcome})
        return Done(f"{base}/jobs/{record.id}?{query}")

    async def on_queue(self, request: Request, base: str, action: str, queue: str) -> Done:
        try:
            check_queue_name(queue)
        except JobDefinitionError:
            # The path's text (`{queue:path}`: slashes too), which no queue can be named.
            raise Refused(404, f"no queue can be called {queue!r}") from None
        who = await self._who(request, action, queue)
        await (self._jobs.pause if action == "pause" else self._jobs.resume)(queue)
        logger.info("dashboard: %s: %s queue %r", who, action, queue)
        return Done(f"{base}/")


_SAID = {"changed": "done", "unchanged": "not done: the job's status does not allow it"}
# A workflow's step can be refused for another reason than its status.
_RETRY_REFUSED = " (nor is a workflow's step retried before the steps it waits for that failed)"


def said_of(action: str | None, outcome: str | None) -> str | None:
    """What the job page says of the action just done (read from its redirect's query)."""
    if action not in JOB_ACTIONS or outcome not in _SAID:
        return None
    why_not = _RETRY_REFUSED if action == "retry" and outcome == "unchanged" else ""
    return f"{action}: {_SAID[outcome]}{why_not}"
