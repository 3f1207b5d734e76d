"""The status routes (`web/_status_routes.py`, `_endpoints.py`, `_types.py`): the status route of
`job_status_router`, the same routes added to a FastAPI app by `add_job_status_routes` (in its
OpenAPI schema, answering as the router does), and who may see a job. The router's event stream
is in test_sse.py; the FastAPI guide's app served by uvicorn, in test_example_fastapi.py."""

from __future__ import annotations

import functools
import json
import math
import subprocess
import sys
from collections.abc import Callable, Iterator
from typing import Any

import httpx2
import pytest
from fastapi import APIRouter, Depends, FastAPI, HTTPException
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Mount, Route
from starlette.testclient import TestClient

from starlette_jobs import (
    JobRecord,
    Jobs,
    job,
)
from starlette_jobs.testing import run_enqueued_now
from starlette_jobs.web import (
    JobStatusTokens,
    accepted,
    add_job_status_routes,
    job_status_router,
    public_fields,
)
from tests.conftest import StartJobs
from tests.faultproxy import FaultProxy
from tests.web.reports import broken_report, enqueue_report, make_report, starlette_app

# -- the status route ----------------------------------------------------------------------------


def test_the_status_route_shows_the_public_fields_and_the_result_once_succeeded(
    client: TestClient,
) -> None:
    job_id = client.post("/reports", json={"month": "2026-01", "pages": 2}).json()["job_id"]
    pending = client.get(f"/jobs/{job_id}")
    assert pending.headers["retry-after"] == "1"
    assert pending.headers["cache-control"] == "no-store"
    assert "result" not in pending.json()
    run_enqueued_now(client)
    finished = client.get(f"/jobs/{job_id}")
    assert "retry-after" not in finished.headers
    shown = finished.json()
    assert set(shown) == {
        "id",
        "status",
        "attempts",
        "progress",
        "created_at",
        "run_at",
        "started_at",
        "finished_at",
        "result",
    }
    assert (shown["id"], shown["status"], shown["attempts"]) == (job_id, "succeeded", 1)
    assert shown["result"] == {"month": "2026-01", "pages": 2}
    assert shown["finished_at"] is not None


def test_the_status_route_never_shows_arguments_or_errors_by_default(client: TestClient) -> None:
    job_id = client.portal.call(broken_report.enqueue, "secret month")  # type: ignore[union-attr]
    run_enqueued_now(client)
    shown = client.get(f"/jobs/{job_id}")
    assert shown.json()["status"] == "failed"
    assert "secret" not in shown.text
    assert "result" not in shown.json()


def test_retry_after_is_when_a_pending_job_comes_due(client: TestClient) -> None:
    delayed = make_report.configure(delay=600)
    job_id = client.portal.call(  # type: ignore[union-attr]
        functools.partial(delayed.enqueue, month="2026-01", pages=1)
    )
    assert 590 <= int(client.get(f"/jobs/{job_id}").headers["retry-after"]) <= 600


@pytest.mark.parametrize(
    "not_a_job", ["123456", "0", "-1", "abc", str(2**63), "9" * 400, "1.5", "%F0%9F%98%80"]
)
def test_the_status_route_answers_404_for_what_is_no_job(
    client: TestClient, not_a_job: str
) -> None:
    response = client.get(f"/jobs/{not_a_job}")
    assert response.status_code == 404
    assert "no job with id" in response.json()["detail"]


def test_what_is_public_is_the_users_choice(database_dsn: str) -> None:
    def mine(record: JobRecord) -> dict[str, Any]:
        return {"state": record.status, "month": record.arguments["month"]}

    with TestClient(starlette_app(database_dsn, public=mine, retry_after=5)) as client:
        response = client.post("/reports", json={"month": "2026-05", "pages": 1})
        shown = client.get(response.headers["location"])
    assert shown.json() == {"state": "pending", "month": "2026-05"}
    assert shown.headers["retry-after"] == "5"


async def test_public_fields_show_timestamps_as_iso_8601(start_jobs: StartJobs) -> None:
    async with start_jobs(queues={}) as jobs:  # no worker: it stays pending
        record = await jobs.get(await make_report.enqueue(month="2026-01", pages=2))
    assert record is not None
    fields = public_fields(record)
    assert fields["created_at"] == record.created_at.isoformat()
    assert fields["run_at"] == record.run_at.isoformat()
    assert (fields["status"], fields["started_at"], fields["finished_at"]) == (
        "pending",
        None,
        None,
    )
    json.dumps(fields, allow_nan=False)  # JSON-ready as it is


@pytest.mark.parametrize(
    "options",
    [
        {"retry_after": -1},
        {"retry_after": 1.5},
        {"progress_interval": 0},
        {"progress_interval": math.nan},
    ],
)
@pytest.mark.parametrize(
    "make_routes",
    [job_status_router, functools.partial(add_job_status_routes, FastAPI())],
    ids=["job_status_router", "add_job_status_routes"],
)
def test_the_routes_refuse_settings_that_cannot_work(
    options: dict[str, Any], make_routes: Callable[..., object]
) -> None:
    with pytest.raises(ValueError, match=next(iter(options))):
        make_routes(**options)


def test_the_module_needs_neither_fastapi_nor_sse_starlette_to_import() -> None:
    """A plain Starlette app uses `starlette_jobs.web` without FastAPI; without the `sse` extra,
    only the event stream is missing."""
    code = (
        "import sys, starlette_jobs.web as web; web.job_status_router(events=False); "
        "print(sorted(m for m in ('fastapi', 'sse_starlette') if m in sys.modules))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"


@pytest.mark.parametrize("framework", ["starlette", "fastapi"])
async def test_the_status_routes_answer_503_while_the_database_is_unreachable(
    fault_proxy: FaultProxy, framework: str
) -> None:
    app: Starlette = Starlette(routes=[Mount("/jobs", app=job_status_router())])
    if framework == "fastapi":
        app = FastAPI()
        add_job_status_routes(app)
    transport = httpx2.ASGITransport(app=app)
    async with (
        Jobs(fault_proxy.dsn, queues={}) as jobs,
        httpx2.AsyncClient(transport=transport, base_url="http://test") as client,
    ):
        app.state.jobs = jobs  # what the lifespan would do
        job_id = await make_report.enqueue(month="2026-01", pages=1)
        assert (await client.get(f"/jobs/{job_id}")).status_code == 200
        await fault_proxy.close()
        for path in (f"/jobs/{job_id}", f"/jobs/{job_id}/events"):
            response = await client.get(path)
            assert response.status_code == 503, path
            assert response.headers["retry-after"] == "1"
            assert "unavailable" in response.json()["detail"]


# -- add_job_status_routes: the same routes as FastAPI path operations ---------------------------


def fastapi_app_with_status_routes(dsn: str, **options: Any) -> FastAPI:
    """The status routes added as path operations at /jobs, and the router's mounted at
    /mounted to compare with; no worker unless `options` give queues."""
    queues = options.pop("queues", {})
    app = FastAPI(lifespan=Jobs(dsn, queues=queues, poll_interval=0.2).lifespan)
    app.add_api_route("/reports", enqueue_report, methods=["POST"])
    add_job_status_routes(app, "/jobs", **options)  # before the mount: accepted() finds it
    app.mount("/mounted", job_status_router(**options))
    return app


@pytest.fixture
def fastapi_client(database_dsn: str) -> Iterator[TestClient]:
    with TestClient(fastapi_app_with_status_routes(database_dsn)) as client:
        yield client


def test_the_added_routes_are_in_the_openapi_schema_with_an_integer_job_id(
    fastapi_client: TestClient,
) -> None:
    paths = fastapi_client.get("/openapi.json").json()["paths"]
    assert {"/jobs/{job_id}", "/jobs/{job_id}/events"} <= set(paths)
    assert not any(path.startswith("/mounted") for path in paths)  # what the new way is for
    for path in ("/jobs/{job_id}", "/jobs/{job_id}/events"):
        operation = paths[path]["get"]
        assert operation["tags"] == ["jobs"]
        [parameter] = operation["parameters"]
        assert (parameter["name"], parameter["in"], parameter["required"]) == (
            "job_id",
            "path",
            True,
        )
        assert parameter["schema"]["type"] == "integer"
        assert (parameter["schema"]["minimum"], parameter["schema"]["maximum"]) == (1, 2**63 - 1)
        assert set(operation["responses"]) == {"200", "404", "422", "503"}
        for failure in ("404", "503"):
            assert list(operation["responses"][failure]["content"]) == ["application/json"]
    status = paths["/jobs/{job_id}"]["get"]["responses"]["200"]
    assert list(status["content"]) == ["application/json"]
    assert "Retry-After" in status["headers"]
    events = paths["/jobs/{job_id}/events"]["get"]["responses"]["200"]
    assert list(events["content"]) == ["text/event-stream"]


def test_the_added_status_route_answers_as_the_mounted_router_does(
    fastapi_client: TestClient,
) -> None:
    response = fastapi_client.post("/reports", json={"month": "2026-01", "pages": 2})
    job_id = response.json()["job_id"]
    assert response.headers["location"] == f"http://testserver/jobs/{job_id}"  # accepted()
    for moment in ("pending", "succeeded"):
        if moment == "succeeded":
            run_enqueued_now(fastapi_client)
        added = fastapi_client.get(f"/jobs/{job_id}")
        mounted = fastapi_client.get(f"/mounted/{job_id}")
        assert (added.status_code, added.json()["status"]) == (200, moment)
        assert added.content == mounted.content
        assert added.headers == mounted.headers
    assert "retry-after" not in added.headers  # it has finished


def test_the_added_routes_answer_404_for_no_job_and_fastapis_422_for_no_id(
    fastapi_client: TestClient,
) -> None:
    for path in ("/jobs/123456", "/jobs/123456/events"):
        missing = fastapi_client.get(path)
        assert missing.status_code == 404, path
        assert missing.json() == fastapi_client.get(f"/mounted{path[5:]}").json()
    for not_an_id in ["abc", "0", "-1", str(2**63), "1.5"]:
        for path in (f"/jobs/{not_an_id}", f"/jobs/{not_an_id}/events"):
            refused = fastapi_client.get(path)
            assert refused.status_code == 422, path
            assert refused.json()["detail"][0]["loc"] == ["path", "job_id"]


def test_the_added_routes_find_the_job_of_every_spelling_fastapi_takes_for_its_id(
    fastapi_client: TestClient,
) -> None:
    """FastAPI's `JobId` takes `+7` or `7.0` as 7, but the routes looked up the text as it came:
    404 "no job with id '+7'" for a job that exists, where anything not an id is a 422."""
    job_id = fastapi_client.post("/reports", json={"month": "2026-01", "pages": 2}).json()["job_id"]
    shown = fastapi_client.get(f"/jobs/{job_id}")
    missing_id = job_id + 1000
    for spell in ("+{}", "%20{}", "{}.0"):
        response = fastapi_client.get(f"/jobs/{spell.format(job_id)}")
        assert (response.status_code, response.content) == (200, shown.content), spell
        missing = fastapi_client.get(f"/jobs/{spell.format(missing_id)}/events")
        assert missing.status_code == 404, spell
        assert missing.json() == {"detail": f"no job with id '{missing_id}'"}


def test_accepted_finds_the_status_route_added_to_an_api_router(database_dsn: str) -> None:
    router = APIRouter(prefix="/api")
    router.add_api_route("/reports", enqueue_report, methods=["POST"])
    add_job_status_routes(router, "/tasks", events=False, retry_after=3, tags="tasks")
    app = FastAPI(lifespan=Jobs(database_dsn, queues={}).lifespan)
    app.include_router(router)
    with TestClient(app) as client:
        response = client.post("/api/reports", json={"month": "2026-01", "pages": 1})
        job_id = response.json()["job_id"]
        assert response.headers["location"] == f"http://testserver/api/tasks/{job_id}"
        shown = client.get(response.headers["location"])
        assert (shown.json()["status"], shown.headers["retry-after"]) == ("pending", "3")
        assert client.get(f"/api/tasks/{job_id}/events").status_code == 404  # events=False
        paths = client.get("/openapi.json").json()["paths"]
        assert set(paths) == {"/api/reports", "/api/tasks/{job_id}"}
        assert paths["/api/tasks/{job_id}"]["get"]["tags"] == ["tasks"]  # one tag, not five


def test_the_added_events_route_streams_until_the_end(database_dsn: str) -> None:
    app = fastapi_app_with_status_routes(database_dsn, queues={"web": 1})
    with TestClient(app) as client:
        job_id = client.post("/reports", json={"month": "2026-02", "pages": 3}).json()["job_id"]
        stream = client.get(f"/jobs/{job_id}/events")  # read to its end: the job ends
    assert stream.status_code == 200
    assert stream.headers["content-type"].startswith("text/event-stream")
    assert stream.headers["cache-control"] == "no-store"
    kinds = [line for line in stream.text.splitlines() if line.startswith("event:")]
    assert kinds[-1] == "event: end"
    assert '"pages":3' in stream.text.rsplit("event: end", 1)[1]


def test_the_routes_are_added_only_to_what_has_add_api_route() -> None:
    with pytest.raises(TypeError, match=r"add_api_route.*Starlette.*job_status_router"):
        add_job_status_routes(Starlette())
    for prefix in ("jobs", "/jobs/"):
        with pytest.raises(ValueError, match="prefix"):
            add_job_status_routes(FastAPI(), prefix)
    app = FastAPI()
    add_job_status_routes(app, "")
    assert {"/{job_id}", "/{job_id}/events"} <= set(app.openapi()["paths"])


# -- who may see a job: the authorize hook, FastAPI dependencies, unguessable URLs ---------------


@job(queue="web")
async def private_report(owner: str) -> dict[str, str]:
    return {"signed_url": f"https://files.example/{owner}.pdf?signature=only-for-{owner}"}


async def enqueue_private_report(request: Request) -> Response:
    job_id = await private_report.enqueue(owner=request.headers["x-user"])
    return accepted(request, job_id)


def only_the_owner(request: Request, record: JobRecord) -> bool:
    return record.arguments.get("owner") == request.headers.get("x-user")


async def only_the_owner_async(request: Request, record: JobRecord) -> bool:
    return only_the_owner(request, record)


def signed_in(request: Request) -> None:
    """A FastAPI dependency: no user, no job."""
    if "x-user" not in request.headers:
        raise HTTPException(401, "sign in")


def alice_and_bob(client: TestClient) -> int:
    """Alice's job run to its end; what Bob gets for its status and events, the same as for a
    job that does not exist."""
    response = client.post("/private", headers={"x-user": "alice"})
    run_enqueued_now(client)
    url = response.headers["location"]
    for path in (url, f"{url}/events"):
        mine = client.get(path, headers={"x-user": "alice"})
        assert mine.status_code == 200, path
        assert "only-for-alice" in mine.text
        theirs = client.get(path, headers={"x-user": "bob"})
        assert theirs.status_code == 404, path
        assert "only-for-alice" not in theirs.text
    job_id: int = response.json()["job_id"]
    return job_id


@pytest.mark.parametrize("authorize", [only_the_owner, only_the_owner_async])
def test_the_authorize_hook_hides_a_job_from_other_users_on_both_routes(
    database_dsn: str, authorize: Callable[..., Any]
) -> None:
    app = Starlette(
        routes=[
            Route("/private", enqueue_private_report, methods=["POST"]),
            Mount("/jobs", app=job_status_router(authorize=authorize)),
        ],
        lifespan=Jobs(database_dsn, queues={}).lifespan,
    )
    with TestClient(app) as client:
        job_id = alice_and_bob(client)
        # Denied answers exactly as missing does: whether the job exists does not show.
        denied = client.get(f"/jobs/{job_id}", headers={"x-user": "bob"})
        missing = client.get(f"/jobs/{job_id + 1000}", headers={"x-user": "bob"})
        assert denied.json()["detail"].replace(str(job_id), "N") == missing.json()[
            "detail"
        ].replace(str(job_id + 1000), "N")


def test_the_added_routes_take_fastapi_dependencies_and_the_authorize_hook(
    database_dsn: str,
) -> None:
    app = FastAPI(lifespan=Jobs(database_dsn, queues={}).lifespan)
    app.add_api_route("/private", enqueue_private_report, methods=["POST"])
    add_job_status_routes(app, authorize=only_the_owner, dependencies=[Depends(signed_in)])
    with TestClient(app) as client:
        job_id = alice_and_bob(client)
        for path in (f"/jobs/{job_id}", f"/jobs/{job_id}/events"):
            assert client.get(path).status_code == 401, path
        assert client.get("/jobs/123456", headers={"x-user": "bob"}).status_code == 404


def test_status_tokens_make_status_urls_that_cannot_be_guessed(database_dsn: str) -> None:
    tokens = JobStatusTokens("a secret of at least thirty-two bytes, from the environment")

    async def enqueue(request: Request) -> Response:
        job_id = await private_report.enqueue(owner=request.headers["x-user"])
        return accepted(request, job_id, tokens=tokens)

    app = Starlette(
        routes=[
            Route("/private", enqueue, methods=["POST"]),
            Mount("/jobs", app=job_status_router(tokens=tokens)),
        ],
        lifespan=Jobs(database_dsn, queues={}).lifespan,
    )
    with TestClient(app) as client:
        response = client.post("/private", headers={"x-user": "alice"})
        run_enqueued_now(client)
        job_id = response.json()["job_id"]
        location = response.headers["location"]
        token = location.rsplit("/", 1)[1]
        assert location == f"http://testserver/jobs/{token}" == response.json()["status_url"]
        assert str(job_id) not in token
        assert client.get(location).json()["result"]["signed_url"].endswith("only-for-alice")
        assert "only-for-alice" in client.get(f"{location}/events").text
        # The row id no longer opens it, nor a token altered or signed with another secret.
        other = JobStatusTokens("another secret of at least thirty-two bytes, too").token(job_id)
        altered = token[:-1] + ("A" if token[-1] != "A" else "B")
        for guess in (str(job_id), other, altered, token + "A", "", "%F0%9F%98%80"):
            for path in (f"/jobs/{guess}", f"/jobs/{guess}/events"):
                assert client.get(path).status_code == 404, (guess, path)


def test_accepted_says_when_the_status_route_needs_tokens(database_dsn: str) -> None:
    tokens = JobStatusTokens(b"\x00" * 32)
    app = Starlette(
        routes=[
            Route("/private", enqueue_private_report, methods=["POST"]),
            Mount("/jobs", app=job_status_router(tokens=tokens)),
        ],
        lifespan=Jobs(database_dsn, queues={}).lifespan,
    )
    with (
        TestClient(app, raise_server_exceptions=True) as client,
        pytest.raises(LookupError, match="tokens="),
    ):
        client.post("/private", headers={"x-user": "alice"})


def test_the_added_routes_take_status_tokens(database_dsn: str) -> None:
    tokens = JobStatusTokens("a secret of at least thirty-two bytes, from the environment")

    async def enqueue(request: Request) -> Response:
        job_id = await private_report.enqueue(owner=request.headers["x-user"])
        return accepted(request, job_id, tokens=tokens)

    app = FastAPI(lifespan=Jobs(database_dsn, queues={}).lifespan)
    app.add_api_route("/private", enqueue, methods=["POST"])
    add_job_status_routes(app, "/jobs", tokens=tokens)
    with TestClient(app) as client:
        response = client.post("/private", headers={"x-user": "alice"})
        job_id = response.json()["job_id"]
        location = response.headers["location"]
        assert location == f"http://testserver/jobs/{tokens.token(job_id)}"
        assert client.get(location).json()["status"] == "pending"
        assert client.get(f"/jobs/{job_id}").status_code == 404
        assert client.get(f"/jobs/{job_id}/events").status_code == 404
        paths = client.get("/openapi.json").json()["paths"]
        [parameter] = paths["/jobs/{job_token}"]["get"]["parameters"]
        assert (parameter["name"], parameter["schema"]["type"]) == ("job_token", "string")
