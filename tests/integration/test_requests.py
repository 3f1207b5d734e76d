"""On-success enqueue on a real server (uvicorn, in this process) and a real socket: a client
that disconnects mid-request. The handler's own outcome decides, as for any request: the
server lets it run on, and the jobs it enqueued are written if its response is a success (that
no one is left to read it does not undo the work the request did), and not if it raises."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator

import pytest
import uvicorn
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

from starlette_jobs import OnSuccessMiddleware, job
from tests.conftest import StartJobs, eventually


@job
async def receipt(order: int) -> None: ...


class Seen:
    """What one test's request went through; made anew by each test, in its event loop."""

    def __init__(self) -> None:
        self.arrived = asyncio.Event()  # the handler has the body and has enqueued
        self.finished = asyncio.Event()  # the app is done with the request, whatever the end
        self.handled: list[tuple[str, int]] = []  # what came after the body, and the job id


seen = Seen()


async def order(request: Request) -> Response:
    body = await request.json()
    job_id = await receipt.configure(on_success=True).enqueue(order=body["order"])
    seen.arrived.set()
    message = await request.receive()  # the next message, once the body is read: the client left
    seen.handled.append((message["type"], job_id))
    if body["fail"]:
        raise RuntimeError("the handler failed after its client left")
    return JSONResponse({"job_id": job_id}, status_code=202)


inner = Starlette(
    routes=[Route("/orders", order, methods=["POST"])],
    middleware=[Middleware(OnSuccessMiddleware)],
)


async def app(scope: Scope, receive: Receive, send: Send) -> None:
    try:
        await inner(scope, receive, send)
    finally:
        seen.finished.set()


@pytest.fixture
async def server_port() -> AsyncIterator[int]:
    global seen
    seen = Seen()
    config = uvicorn.Config(app, host="127.0.0.1", port=0, lifespan="off", log_level="critical")
    server = uvicorn.Server(config)
    serving = asyncio.create_task(server.serve())

    async def started() -> bool:
        return server.started

    await eventually(started, "uvicorn to listen")
    yield server.servers[0].sockets[0].getsockname()[1]
    server.should_exit = True
    await serving


async def post_and_leave(port: int, body: dict[str, object]) -> None:
    """POSTs `body`, and closes the connection once the handler has it, without an answer."""
    _, writer = await asyncio.open_connection("127.0.0.1", port)
    data = json.dumps(body).encode()
    writer.write(
        b"POST /orders HTTP/1.1\r\nHost: test\r\nContent-Type: application/json\r\n"
        b"Content-Length: %d\r\n\r\n%s" % (len(data), data)
    )
    await writer.drain()
    await seen.arrived.wait()
    writer.close()
    await writer.wait_closed()


@pytest.mark.parametrize(("fail", "written"), [(False, True), (True, False)])
async def test_a_client_that_leaves_mid_request_leaves_the_outcome_to_the_handler(
    start_jobs: StartJobs, server_port: int, fail: bool, written: bool
) -> None:
    async with start_jobs(queues={}) as jobs:
        await post_and_leave(server_port, {"order": 7, "fail": fail})
        async with asyncio.timeout(10):
            await seen.finished.wait()
        [(after_body, job_id)] = seen.handled
        assert after_body == "http.disconnect"  # the handler ran on after its client had gone
        assert [record.id for record in await jobs.list()] == ([job_id] if written else [])
