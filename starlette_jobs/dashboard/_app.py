"""`Dashboard`: the ASGI app an operator's pages are served by, one route per page; each page
reads what it shows through `Jobs` and renders one template."""

from __future__ import annotations

import math
import secrets
from collections.abc import Awaitable, Iterable
from datetime import UTC, datetime
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.types import Receive, Scope, Send

from .._errors import DatabaseUnavailableError
from .._jobs import Jobs
from .._options import check_queue_name
from .._records import JobStatus
from ._actions import (
    JOB_ACTIONS,
    QUEUE_ACTIONS,
    Actions,
    Authorize,
    Done,
    Refused,
    job_actions,
    said_of,
)
from ._bulk import BulkRuns, bulk_actions
from ._csrf import FIELD, CsrfTokens
from ._listing import SCAN_WINDOW, FilterError, JobFilter, job_id
from ._overview import overview, queue_names
from ._templates import STATIC, templates
from ._trace_links import TraceLinks
from ._workflow_pages import dependents, in_order, workflow_id

_MAX_PAGE_SIZE = 1_000


class Dashboard:
    """The operator's pages over a `Jobs`, as an ASGI app to mount: an overview of the queues,
    the job list with its filters, each job with its history, the workers, the schedules and
    the workflows; and, when `authorize` is given, the actions: retry, cancel and release a
    job, pause and resume a queue. Server-rendered, readable without JavaScript.

    Mount it in the app whose lifespan starts `jobs`, behind whatever guards the app's other
    admin pages: the pages show every job's arguments and results.

    Args:
        jobs: the `Jobs` to show (started by the app's lifespan).
        queues: the queues the overview shows. Default: those `jobs` declares, those the live
            workers work, and those holding jobs no live worker can run.
        page_size: jobs per page of the list (1 to 1,000).
        refresh: seconds between reloads of the pages that change as jobs run (a `<meta>`
            refresh: no script); None: no reload.
        authorize: `authorize(request, action, queue)`, sync or async, called for each action
            ("retry", "cancel", "release", "pause", "resume") on a job of `queue` or on `queue`,
            and once for each bulk action ("bulk_retry", "bulk_cancel") over jobs of `queue`:
            a name (who asks, written in the log line of the action, in each job's event and
            in the bulk action's record) or True allows it; False refuses it (403, nothing
            changed). None (default): read-only.
        secret: the key that signs the CSRF cookie of the actions' forms. Default: a random
            one per process; give the same one to every process that serves the dashboard.
            An empty one is refused (`ValueError`).
        trace_url: where a job's trace is shown, with `{trace_id}` in its place, e.g.
            "https://tempo.example/trace/{trace_id}": the job page links its trace id there.
            None (default): the trace id is shown, with no link.

    Example:
        >>> app = Starlette(routes=[Mount("/jobs", Dashboard(jobs))], lifespan=jobs.lifespan)
    """

    def __init__(
        self,
        jobs: Jobs,
        *,
        queues: Iterable[str] | None = None,
        page_size: int = 50,
        refresh: float | None = 5.0,
        authorize: Authorize | None = None,
        secret: str | bytes | None = None,
        trace_url: str | None = None,
    ) -> None:
        if type(page_size) is not int or not 1 <= page_size <= _MAX_PAGE_SIZE:
            raise ValueError(f"page_size must be an integer from 1 to 1000, got {page_size!r}")
        if refresh is not None and (
            isinstance(refresh, bool) or not (math.isfinite(refresh) and refresh >= 1)
        ):
            raise ValueError(f"refresh must be at least 1 second, or None, got {refresh!r}")
        self.jobs = jobs
        if isinstance(queues, str):  # its letters would be the queues
            raise ValueError(f"queues must be queue names, not one string: [{queues!r}]?")
        # A name no queue can have would fail each load of the overview: refused here instead.
        self._queues = None if queues is None else [check_queue_name(q) for q in queues]
        self._page_size = page_size
        self._refresh = None if refresh is None else math.ceil(refresh)
        self._templates = templates()
        if secret is not None and not secret:  # an empty HMAC key: anyone could sign a cookie
            raise ValueError("secret must not be empty: give a random one, or None for a new one")
        self._tokens = CsrfTokens(secrets.token_bytes(32) if secret is None else secret)
        self._actions = Actions(jobs, authorize, self._tokens)
        self._bulk = BulkRuns(jobs, self._actions)
        self._trace_links = TraceLinks(trace_url)
        self._app = Starlette(
            routes=[
                Route("/", self._overview, name="overview"),
                Route("/jobs", self._job_list, name="jobs"),
                Route("/jobs/{job_id}", self._job_page, name="job"),
                Route("/workers", self._workers, name="workers"),
                Route("/schedules", self._schedules, name="schedules"),
                Route("/workflows", self._workflow_list, name="workflows"),
                Route("/workflows/{workflow_id}", self._workflow_page, name="workflow"),
                Route("/jobs/{job_id}/{action}", self._job_action, methods=["POST"]),
                Route("/queues/{queue:path}/{action}", self._queue_action, methods=["POST"]),
                Route("/bulk", self._bulk_list, name="bulk"),
                Route("/bulk/{bulk_id}", self._bulk_page, name="bulk_action"),
                Route("/bulk/{bulk_id}/run", self._bulk_run_on, methods=["POST"]),
                Route("/bulk-actions/{action}", self._bulk_action, methods=["POST"]),
                Mount("/static", app=StaticFiles(directory=STATIC), name="static"),
            ],
            exception_handlers={DatabaseUnavailableError: self._unavailable},
        )

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await self._app(scope, receive, send)

    def _render(
        self,
        request: Request,
        template: str,
        context: dict[str, Any],
        *,
        refresh: bool = True,
        status_code: int = 200,
    ) -> Response:
        token = self._tokens.issue(request) if self._actions.enabled else None
        page = {
            # Links are built on the mount's path, wherever the app mounts the dashboard.
            "base": _base(request),
            "now": datetime.now(UTC),
            "refresh": self._refresh if refresh else None,
            "statuses": list(JobStatus),
            "csrf": None if token is None else {"field": FIELD, "token": token},
            **context,
        }
        response = self._templates.TemplateResponse(
            request, template, page, status_code=status_code
        )
        if token is not None:
            self._tokens.keep(request, response, token)
        return response

    def _error(
        self, request: Request, title: str, message: str, status_code: int, *, refresh: bool = False
    ) -> Response:
        """The error page: nothing to reload but a database that may come back."""
        context = {"title": title, "message": message}
        return self._render(
            request, "error.html", context, refresh=refresh, status_code=status_code
        )

    async def _overview(self, request: Request) -> Response:
        now = datetime.now(UTC)
        queues = await overview(self.jobs, await queue_names(self.jobs, self._queues), now)
        return self._render(request, "overview.html", {"queues": queues, "title": "Queues"})

    async def _job_list(self, request: Request) -> Response:
        try:
            wanted = job_id(request.query_params.get("id") or None, "id")
            filters = JobFilter.from_query(request.query_params)
        except FilterError as error:
            return self._error(request, "Bad filter", str(error), 400)
        if wanted is not None:
            if await self.jobs.get(wanted) is not None:
                return RedirectResponse(f"{_base(request)}/jobs/{wanted}", status_code=303)
            return self._error(request, "No such job", f"no job {wanted}", 404)
        floor = top = None
        if filters.windowed:
            # A bounded walk (`SCAN_WINDOW`): the ids below the page's `before`, or the newest.
            if (top := filters.before) is None:
                newest = await self.jobs.list(limit=1)
                top = newest[0].id + 1 if newest else 1
            floor = filters.window_floor(top)
        # Brief: without the arguments, results and errors of each job, which the list does
        # not show (a page of jobs with large arguments read them all: postgres/_brief.py).
        records = await self.jobs._list(
            brief=True,
            status=filters.status,
            queue=filters.queue,
            name=filters.name,
            limit=self._page_size,
            before=filters.before,
            trace_id=filters.trace_id,
            correlation_id=filters.correlation_id,
            finished_after=filters.finished_after,
            after=floor,
        )
        searched = None
        if len(records) == self._page_size:
            older = filters.older(records[-1].id)
        elif floor is not None and top is not None:
            # The window ran out before the page filled: older jobs are the next page's.
            older = filters.older(floor + 1)
            searched = (floor + 1, top - 1)
        else:
            older = None
        context = {
            "title": "Jobs", "records": records, "filters": filters, "older": older,
            "searched": searched, "window": f"{SCAN_WINDOW:,}",
        }  # fmt: skip
        context["bulk"] = bulk_actions(filters) if self._actions.enabled else []
        # No reload: it would empty the filters being typed into the form.
        return self._render(request, "jobs.html", context, refresh=False)

    async def _job_page(self, request: Request) -> Response:
        text = request.path_params["job_id"]
        record = await self.jobs.get(text)
        if record is None:
            return self._error(request, "No such job", f"no job {text}", 404)
        events = await self.jobs.events(record.id)
        workflow = None
        if record.workflow_id is not None:
            workflow = await self.jobs._workflow(record.workflow_id, brief=True)
        context = {
            "title": f"Job {record.id}",
            "record": record,
            "events": events,
            "workflow": workflow,
            "actions": job_actions(record) if self._actions.enabled else [],
            "done": said_of(
                request.query_params.get("action"), request.query_params.get("outcome")
            ),
            "trace_link": self._trace_links.link(record.trace_id),
        }
        return self._render(request, "job.html", context, refresh=not record.finished)

    async def _workers(self, request: Request) -> Response:
        context = {
            "title": "Workers",
            "workers": await self.jobs.workers(),
            "unrunnable": await self.jobs.unrunnable_jobs(),
        }
        return self._render(request, "workers.html", context)

    async def _schedules(self, request: Request) -> Response:
        context = {"title": "Schedules", "schedules": await self.jobs.schedules()}
        return self._render(request, "schedules.html", context)

    async def _workflow_list(self, request: Request) -> Response:
        try:
            before = workflow_id(request.query_params.get("before") or None, "before")
        except FilterError as error:
            return self._error(request, "Bad filter", str(error), 400)
        flows = await self.jobs.workflows(limit=self._page_size, before=before)
        older = flows[-1].id if len(flows) == self._page_size else None
        context = {
            "title": "Workflows", "workflows": flows, "in_order": in_order,
            "before": before, "older": older,
        }  # fmt: skip
        return self._render(request, "workflows.html", context, refresh=before is None)

    async def _workflow_page(self, request: Request) -> Response:
        text = request.path_params["workflow_id"]
        try:
            wanted = workflow_id(text, "a workflow's page")
        except FilterError:
            wanted = None
        # Brief, as the job list: the page shows a line of each step.
        flow = None if wanted is None else await self.jobs._workflow(wanted, brief=True)
        if flow is None:
            return self._error(request, "No such workflow", f"no workflow {text}", 404)
        context = {
            "title": f"Workflow {flow.id}: {flow.name}",
            "workflow": flow,
            "dependents": dependents(flow),
        }
        return self._render(request, "workflow.html", context, refresh=not flow.finished)

    async def _job_action(self, request: Request) -> Response:
        action = request.path_params["action"]
        if action not in JOB_ACTIONS:
            return self._refused(request, Refused(404, f"no action is called {action!r}"))
        text = request.path_params["job_id"]
        return await self._act(request, self._actions.on_job(request, _base(request), action, text))

    async def _queue_action(self, request: Request) -> Response:
        action, queue = request.path_params["action"], request.path_params["queue"]
        if action not in QUEUE_ACTIONS:
            return self._refused(request, Refused(404, f"no action is called {action!r}"))
        return await self._act(
            request, self._actions.on_queue(request, _base(request), action, queue)
        )

    async def _bulk_action(self, request: Request) -> Response:
        action = request.path_params["action"]
        return await self._act(request, self._bulk.start(request, _base(request), action))

    async def _bulk_run_on(self, request: Request) -> Response:
        text = request.path_params["bulk_id"]
        return await self._act(request, self._bulk.run_on(request, _base(request), text))

    async def _bulk_list(self, request: Request) -> Response:
        context = {"title": "Bulk actions", "bulks": await self.jobs.list_bulks(50)}
        return self._render(request, "bulk_list.html", context)

    async def _bulk_page(self, request: Request) -> Response:
        text = request.path_params["bulk_id"]
        record = None
        if text.isascii() and text.isdigit() and len(text) <= 18:
            record = await self.jobs.get_bulk(int(text))
        if record is None:
            return self._error(request, "No such bulk action", f"no bulk action {text}", 404)
        running = self._bulk.running(record.id)
        context = {
            "title": f"Bulk {record.action} {record.id}",
            "bulk": record,
            "running": running,
            "run_on": self._actions.enabled and not record.finished and not running,
            # Its progress, read again each second while it runs, whatever `refresh` says.
            "refresh": None if record.finished else 1,
        }
        return self._render(request, "bulk.html", context)

    async def _act(self, request: Request, action: Awaitable[Done]) -> Response:
        try:
            done = await action
        except Refused as refused:
            return self._refused(request, refused)
        # 303: the browser GETs the page, and a reload does not post the form again.
        return RedirectResponse(done.location, status_code=303)

    def _refused(self, request: Request, refused: Refused) -> Response:
        return self._error(request, "Not done", refused.message, refused.status)

    async def _unavailable(self, request: Request, error: Exception) -> Response:
        return self._error(request, "Database unavailable", str(error), 503, refresh=True)


def _base(request: Request) -> str:
    """The path the dashboard is mounted at ("" at the root)."""
    return str(request.scope.get("root_path", "")).rstrip("/")
