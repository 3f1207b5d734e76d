"""`CorrelationIdMiddleware` (`web/_correlation.py`): each request's `X-Request-ID` (or a new
one) is current while it is handled, and echoed back in the response."""

from __future__ import annotations

from typing import Any

import httpx2
import pytest
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route, WebSocketRoute
from starlette.testclient import TestClient
from starlette.websockets import WebSocket

from starlette_jobs import CorrelationIdMiddleware, correlation_id


async def echo(request: Request) -> JSONResponse:
    return JSONResponse({"correlation_id": correlation_id()})


async def socket(websocket: WebSocket) -> None:
    await websocket.accept()
    await websocket.send_json({"correlation_id": correlation_id()})
    await websocket.close()


def client(header: str | None = None) -> TestClient:
    options = {} if header is None else {"header": header}
    app = Starlette(
        routes=[Route("/", echo), WebSocketRoute("/ws", socket)],
        middleware=[Middleware(CorrelationIdMiddleware, **options)],
    )
    return TestClient(app)


def test_the_requests_id_is_current_while_handling_it_and_echoed_back() -> None:
    response = client().get("/", headers={"X-Request-ID": "req-42"})
    assert response.json() == {"correlation_id": "req-42"}
    assert response.headers["x-request-id"] == "req-42"
    assert correlation_id() is None  # not left behind


def test_a_request_without_one_gets_a_new_id_each_time() -> None:
    with client() as http:
        first, second = http.get("/"), http.get("/")
    ids = [response.headers["x-request-id"] for response in (first, second)]
    assert [response.json()["correlation_id"] for response in (first, second)] == ids
    assert ids[0] != ids[1]
    assert all(len(value) == 32 and int(value, 16) >= 0 for value in ids)


def test_an_overlong_id_is_cut_to_200_characters() -> None:
    response = client().get("/", headers={"X-Request-ID": "x" * 1000})
    assert response.json()["correlation_id"] == "x" * 200
    assert response.headers["x-request-id"] == "x" * 200


def test_the_header_can_be_another_one_named_in_any_case() -> None:
    response = client(header="X-Correlation-ID").get("/", headers={"x-correlation-id": "c-1"})
    assert response.json() == {"correlation_id": "c-1"}
    assert response.headers["X-Correlation-ID"] == "c-1"
    assert "x-request-id" not in response.headers


def test_other_connections_pass_through_untouched() -> None:
    with client().websocket_connect("/ws", headers={"X-Request-ID": "ws-1"}) as websocket:
        assert websocket.receive_json() == {"correlation_id": None}


async def get_with_id(sent: bytes) -> tuple[Any, bytes]:
    """The id the endpoint saw and the header's bytes in the response. Through httpx's ASGI
    transport: the TestClient cannot read a response header that is not ASCII."""
    transport = httpx2.ASGITransport(app=client().app)
    async with httpx2.AsyncClient(transport=transport, base_url="http://test") as http:
        response = await http.get("/", headers={b"X-Request-ID": sent})
    return response.json()["correlation_id"], dict(response.headers.raw)[b"x-request-id"]


@pytest.mark.parametrize("sent", ["req-é", "req-€", "é" * 300])
async def test_an_id_in_utf8_is_kept_as_the_characters_sent_and_echoed_as_sent(sent: str) -> None:
    """`req-é` was kept as `req-Ã©` (its UTF-8 bytes read as Latin-1), where the same bytes in
    `Idempotency-Key` are read as UTF-8."""
    assert await get_with_id(sent.encode()) == (sent[:200], sent[:200].encode())


async def test_an_id_that_is_not_utf8_is_read_a_character_per_byte_and_echoed_as_sent() -> None:
    assert await get_with_id(b"req-\xff") == ("req-\xff", b"req-\xff")


async def test_a_response_start_without_headers_gets_the_id() -> None:
    """ASGI makes `headers` optional in `http.response.start`: a raw app that leaves it out got
    a KeyError from the middleware, where it gets the id."""

    async def bare(scope: Any, receive: Any, send: Any) -> None:
        await send({"type": "http.response.start", "status": 204})
        await send({"type": "http.response.body", "body": b""})

    transport = httpx2.ASGITransport(app=CorrelationIdMiddleware(bare))
    async with httpx2.AsyncClient(transport=transport, base_url="http://test") as http:
        response = await http.get("/", headers={"X-Request-ID": "r-1"})
    assert (response.status_code, response.headers["x-request-id"]) == (204, "r-1")


async def test_wrapped_around_the_app_it_marks_even_starlettes_own_500() -> None:
    """docs/tracing.md: in `middleware=[...]` the 500 for an exception no handler caught goes
    out without the id (Starlette sends it from outside the list); wrapped around the whole
    app, it has it."""

    async def broken(request: Request) -> JSONResponse:
        raise RuntimeError("boom")

    listed = Starlette(
        routes=[Route("/", broken)], middleware=[Middleware(CorrelationIdMiddleware)]
    )
    wrapped = CorrelationIdMiddleware(Starlette(routes=[Route("/", broken)]))
    seen = []
    for app in (listed, wrapped):
        transport = httpx2.ASGITransport(app=app, raise_app_exceptions=False)
        async with httpx2.AsyncClient(transport=transport, base_url="http://test") as http:
            response = await http.get("/", headers={"X-Request-ID": "r-500"})
        seen.append((response.status_code, response.headers.get("x-request-id")))
    assert seen == [(500, None), (500, "r-500")]
