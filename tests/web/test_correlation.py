"""`CorrelationIdMiddleware` (`web/_correlation.py`): each request's `X-Request-ID` (or a new
one) is current while it is handled, and echoed back in the response."""

from __future__ import annotations

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
