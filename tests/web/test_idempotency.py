"""The `Idempotency-Key` header as a job's idempotency key (`_idempotency.py`): a retried POST
gets the same job id and the same 202, even after the job finished, and a 422 if its body
differs; two endpoints, or two users, with the same key get a job each. On a real PostgreSQL
(the memory store's keys are held to the same rules by tests/contract/test_requests_contract.py)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import httpx2
import pytest
from fastapi import APIRouter, FastAPI
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Mount, Route

from starlette_jobs import (
    JobArgumentsError,
    Jobs,
    JobStatus,
    OnSuccessMiddleware,
    idempotency_key,
    job,
)
from starlette_jobs.web import job_arguments_error_handler
from tests.conftest import StartJobs

charged: list[int] = []


@job
async def charge(order: int) -> None:
    charged.append(order)


@job
async def tip(order: int, cents: int) -> None: ...


def enqueue_charge(on_success: bool = False) -> Any:
    async def endpoint(request: Request) -> Response:
        key = idempotency_key(request, scope=request.headers.get("x-user"))
        order = int(request.path_params["order"])
        configured = charge.configure(idempotency_key=key, on_success=on_success)
        return JSONResponse({"job_id": await configured.enqueue(order=order)}, status_code=202)

    return endpoint


def enqueue_tip(on_success: bool = False) -> Any:
    """An endpoint whose job takes the request's body."""

    async def endpoint(request: Request) -> Response:
        configured = tip.configure(idempotency_key=idempotency_key(request), on_success=on_success)
        job_id = await configured.enqueue(
            order=request.path_params["order"], **await request.json()
        )
        return JSONResponse({"job_id": job_id}, status_code=202)

    return endpoint


pay, refund, pay_on_success = enqueue_charge(), enqueue_charge(), enqueue_charge(True)

app = Starlette(
    routes=[
        Route("/orders/{order:int}/pay", pay, methods=["POST"]),
        Route("/orders/{order:int}/refund", refund, methods=["POST"]),
        Route("/orders/{order:int}/pay-later", pay_on_success, methods=["POST"]),
        Route("/orders/{order:int}/tip", enqueue_tip(), methods=["POST"]),
        Route("/orders/{order:int}/tip-later", enqueue_tip(True), methods=["POST"]),
    ],
    middleware=[Middleware(OnSuccessMiddleware)],
    exception_handlers={JobArgumentsError: job_arguments_error_handler},
)


@pytest.fixture
async def jobs(start_jobs: StartJobs) -> AsyncIterator[Jobs]:
    charged.clear()
    async with start_jobs() as started:
        yield started


@pytest.fixture
async def client() -> AsyncIterator[httpx2.AsyncClient]:
    transport = httpx2.ASGITransport(app=app)
    async with httpx2.AsyncClient(transport=transport, base_url="http://test") as opened:
        yield opened


def key(value: str, user: str | None = None) -> dict[str, str]:
    return {"Idempotency-Key": value} | ({} if user is None else {"X-User": user})


@pytest.mark.parametrize("path", ["/orders/7/pay", "/orders/7/pay-later"])
async def test_a_retried_post_gets_the_same_job_and_the_same_202_even_after_it_ran(
    jobs: Jobs, client: httpx2.AsyncClient, path: str
) -> None:
    first = await client.post(path, headers=key("a1"))
    retried = await client.post(path, headers=key("a1"))
    assert (retried.status_code, retried.json()) == (first.status_code, first.json())
    assert first.status_code == 202
    await jobs.drain()
    # The job has finished: the key still holds, and the retry gets the job, not a second one.
    late = await client.post(path, headers=key("a1"))
    assert late.json() == first.json()
    await jobs.drain()
    assert charged == [7]
    assert await jobs.count_by_status() == {**dict.fromkeys(JobStatus, 0), JobStatus.SUCCEEDED: 1}


@pytest.mark.parametrize("path", ["/orders/7/tip", "/orders/7/tip-later"])
async def test_a_retry_with_the_same_key_and_another_body_is_a_422(
    jobs: Jobs, client: httpx2.AsyncClient, path: str
) -> None:
    first = await client.post(path, headers=key("t1"), json={"cents": 100})
    assert first.status_code == 202
    reused = await client.post(path, headers=key("t1"), json={"cents": 250})
    assert reused.status_code == 422
    assert reused.json() == {
        "detail": [
            {
                "type": "idempotency_key_reused",
                "loc": ["body"],
                "msg": "this idempotency key was used before with different arguments: a retry "
                "must send the same ones, and a new request needs a new key",
                "input": None,
            }
        ]
    }
    # The same arguments once validated are the same request: the first job, not a 422.
    retried = await client.post(path, headers=key("t1"), json={"cents": "100"})
    assert (retried.status_code, retried.json()) == (202, first.json())
    # Another key is another request, whatever its body.
    other = await client.post(path, headers=key("t2"), json={"cents": 250})
    assert other.status_code == 202
    assert [(r.id, r.arguments) for r in await jobs.list()] == [
        (other.json()["job_id"], {"order": 7, "cents": 250}),
        (first.json()["job_id"], {"order": 7, "cents": 100}),
    ]


async def test_retries_that_arrive_at_once_share_one_job(
    jobs: Jobs, client: httpx2.AsyncClient
) -> None:
    responses = await asyncio.gather(
        *(client.post("/orders/7/pay", headers=key("a1")) for _ in range(10))
    )
    assert {r.status_code for r in responses} == {202}
    assert len({r.json()["job_id"] for r in responses}) == 1
    assert len(await jobs.list()) == 1


async def test_two_endpoints_or_two_users_with_one_key_get_a_job_each(
    jobs: Jobs, client: httpx2.AsyncClient
) -> None:
    paid = await client.post("/orders/7/pay", headers=key("a1"))
    refunded = await client.post("/orders/7/refund", headers=key("a1"))
    by_ada = await client.post("/orders/7/pay", headers=key("a1", user="ada"))
    by_bob = await client.post("/orders/7/pay", headers=key("a1", user="bob"))
    again_by_bob = await client.post("/orders/7/pay", headers=key("a1", user="bob"))
    ids = [r.json()["job_id"] for r in (paid, refunded, by_ada, by_bob)]
    assert len(set(ids)) == 4
    assert again_by_bob.json()["job_id"] == by_bob.json()["job_id"]
    assert len(await jobs.list()) == 4


async def test_without_the_header_every_post_is_a_new_job(
    jobs: Jobs, client: httpx2.AsyncClient
) -> None:
    first = await client.post("/orders/7/pay")
    second = await client.post("/orders/7/pay")
    assert first.json() != second.json()
    assert len(await jobs.list()) == 2


@pytest.mark.parametrize("value", ["", "x" * 256])
async def test_an_empty_or_overlong_key_is_a_400(
    jobs: Jobs, client: httpx2.AsyncClient, value: str
) -> None:
    response = await client.post("/orders/7/pay", headers=key(value))
    assert response.status_code == 400
    assert "Idempotency-Key header must be 1 to 255" in response.text
    assert await jobs.list() == []


def request(headers: dict[str, str], **scope: Any) -> Request:
    raw = [(name.lower().encode(), value.encode()) for name, value in headers.items()]
    return Request({"type": "http", "method": "POST", "path": "/p", "headers": raw, **scope})


class _Route:
    """What FastAPI puts in the scope: the route, with its path template."""

    path = "/orders/{order_id}/pay"


def test_the_key_is_scoped_by_method_endpoint_and_scope() -> None:
    assert idempotency_key(request({})) is None
    by_route = idempotency_key(request(key("k"), route=_Route()))
    assert by_route == '["POST","/orders/{order_id}/pay",null,"k"]'
    by_endpoint = idempotency_key(request(key("k"), endpoint=enqueue_charge))
    assert by_endpoint == '["POST","tests.web.test_idempotency.enqueue_charge",null,"k"]'
    assert idempotency_key(request(key("k")), scope=7) == '["POST","/p",7,"k"]'
    assert idempotency_key(request(key("k")), scope="7") == '["POST","/p","7","k"]'
    # A separator in a value cannot make one key pass for another.
    assert idempotency_key(request(key('k"]')), scope="a") != idempotency_key(
        request(key("k")), scope='a"],["k'
    )


async def key_of(request: Request) -> Response:
    return JSONResponse(idempotency_key(request))


async def other_key_of(request: Request) -> Response:
    return JSONResponse(idempotency_key(request))


async def keys_at(app: Any, paths: list[str]) -> list[str]:
    """The key each path's endpoint makes of one header value."""
    transport = httpx2.ASGITransport(app=app)
    async with httpx2.AsyncClient(transport=transport, base_url="http://test") as client:
        return [(await client.post(path, headers=key("k"))).json() for path in paths]


async def test_the_prefix_a_route_is_mounted_under_is_part_of_its_endpoint() -> None:
    """Two endpoints of one path template under two mounts got one key, and so one job."""
    app = Starlette(
        routes=[
            Mount("/v1", routes=[Route("/pay/{order}", key_of, methods=["POST"])]),
            Mount("/v2", routes=[Route("/pay/{order}", other_key_of, methods=["POST"])]),
            Mount("/v3", app=Starlette(routes=[Route("/pay/{order}", key_of, methods=["POST"])])),
            Route("/pay/{order}", key_of, methods=["POST"]),
        ]
    )
    keys = await keys_at(app, ["/v1/pay/7", "/v2/pay/7", "/v3/pay/7", "/pay/7", "/v1/pay/8"])
    assert keys == [
        '["POST","/v1/pay/{order}",null,"k"]',
        '["POST","/v2/pay/{order}",null,"k"]',
        '["POST","/v3/pay/{order}",null,"k"]',
        '["POST","/pay/{order}",null,"k"]',
        '["POST","/v1/pay/{order}",null,"k"]',  # another order, the same endpoint
    ]


async def test_the_prefix_a_fastapi_router_is_included_under_is_part_of_its_endpoint() -> None:
    router = APIRouter()

    @router.post("/pay/{order}")
    async def pay(order: int, request: Request) -> Any:
        return idempotency_key(request)

    app = FastAPI()
    app.include_router(router, prefix="/c")
    app.include_router(router, prefix="/d/{tenant}")
    app.include_router(router)
    keys = await keys_at(app, ["/c/pay/7", "/d/acme/pay/7", "/pay/7"])
    assert keys == [
        '["POST","/c/pay/{order}",null,"k"]',
        '["POST","/d/acme/pay/{order}",null,"k"]',
        '["POST","/pay/{order}",null,"k"]',
    ]


async def test_a_catch_all_route_keeps_the_prefix_it_is_included_or_mounted_under() -> None:
    """A `{x:path}` route's pattern matches the prefix too: /stripe/push and /github/push got
    one key, so the second webhook got the first one's job and its own was never enqueued."""
    hooks = APIRouter()

    @hooks.post("/{event:path}")
    async def webhook(event: str, request: Request) -> Any:
        return idempotency_key(request)

    app = FastAPI()
    app.include_router(hooks, prefix="/stripe")
    app.include_router(hooks, prefix="/github")
    app.include_router(hooks, prefix="/t/{tenant}")
    app.mount("/files", Starlette(routes=[Route("/{rest:path}", key_of, methods=["POST"])]))
    paths = ["/stripe/push", "/github/push", "/stripe/github/push", "/t/acme/x/y", "/files/a/b"]
    assert await keys_at(app, paths) == [
        '["POST","/stripe/{event:path}",null,"k"]',
        '["POST","/github/{event:path}",null,"k"]',
        '["POST","/stripe/{event:path}",null,"k"]',  # another event, the same endpoint
        '["POST","/t/acme/{event:path}",null,"k"]',
        '["POST","/files/{rest:path}",null,"k"]',
    ]


async def test_a_plain_asgi_app_mounted_has_its_mount_path_once() -> None:
    """It had it twice ("/hooks/hooks"): the mount's path is in the root path already."""

    async def plain(scope: Any, receive: Any, send: Any) -> None:
        made = idempotency_key(Request(scope, receive))
        await JSONResponse(made)(scope, receive, send)

    app = Starlette(
        routes=[Mount("/hooks", app=plain), Mount("/v1", routes=[Mount("/x", app=plain)])]
    )
    assert await keys_at(app, ["/hooks/push", "/hooks/pull", "/v1/x/push"]) == [
        '["POST","/hooks",null,"k"]',
        '["POST","/hooks",null,"k"]',  # its endpoint: the mounted app
        '["POST","/v1/x",null,"k"]',
    ]


def test_a_key_too_long_to_store_is_hashed() -> None:
    long = idempotency_key(request(key("k" * 255)), scope="u" * 300)
    assert long is not None
    assert long.startswith("sha256:")
    assert len(long) == 7 + 64
    assert long == idempotency_key(request(key("k" * 255)), scope="u" * 300)


def test_the_header_limit_counts_characters_not_bytes() -> None:
    """255 characters of 2 bytes each in UTF-8 (510 on the wire) are a key, kept as the
    characters sent; the 256th is one too many."""
    assert idempotency_key(request(key("é" * 255))) == f'["POST","/p",null,"{"é" * 255}"]'
    with pytest.raises(HTTPException) as refused:
        idempotency_key(request(key("é" * 256)))
    assert refused.value.status_code == 400


@pytest.mark.parametrize("value", ["k\tk", "k\x7fk", "k\x01k", "k\x00k", "k\x85k"])
def test_a_key_with_a_control_character_is_the_400_it_says_it_is(value: str) -> None:
    """The 400 says "printable characters", but a tab or a DEL made a key."""
    with pytest.raises(HTTPException) as refused:
        idempotency_key(request(key(value)))
    assert refused.value.status_code == 400
    assert "1 to 255 printable characters" in str(refused.value.detail)
    assert idempotency_key(request(key("k k"))) == '["POST","/p",null,"k k"]'  # a space prints


def test_a_header_that_is_not_utf8_is_a_400() -> None:
    raw = [(b"idempotency-key", b"k\xff")]
    with pytest.raises(HTTPException) as refused:
        idempotency_key(Request({"type": "http", "method": "POST", "path": "/p", "headers": raw}))
    assert refused.value.status_code == 400
    assert "UTF-8" in str(refused.value.detail)
