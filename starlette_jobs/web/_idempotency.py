"""The `Idempotency-Key` request header, as the idempotency key of the jobs a request enqueues.

A client that did not hear back retries its POST with the same header; the retry must get the
job the first request enqueued, not a second one. The key is scoped, so that two endpoints, or
two users, that happen to send the same header value cannot collide: it is the method, the
endpoint, the caller's `scope` (the authenticated user, say) and the header value, together.

An idempotency key holds for as long as its job is kept (until `retention` prunes it), whatever
the job's status: a retry that comes after the job finished still gets it back. A unique key,
by contrast, holds only while its job is pending or running. A key sent again with a different
body is no retry: the store refuses it (`IdempotencyKeyReusedError`, which
`job_arguments_error_handler` answers 422).
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from typing import Any

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.routing import Mount

from .._storable import MAX_UNIQUE_KEY_LENGTH

HEADER = "Idempotency-Key"
MAX_HEADER_LENGTH = 255
"""The longest header value accepted, in characters (as Stripe's API does). Characters, not
bytes: the scoped key is what PostgreSQL's unique index holds, and it is bounded on its own
(`MAX_UNIQUE_KEY_LENGTH` characters, at most 4 bytes each, well within the index's 2,704
bytes; a longer one is hashed), so the header's limit is only the contract with clients."""

# Control characters (C0, DEL and C1): the 400 promises printable characters. NUL, which
# PostgreSQL cannot store, is one; a lone surrogate cannot come out of decoding UTF-8.
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f]")


def idempotency_key(
    request: Request, *, scope: str | int | None = None, header: str = HEADER
) -> str | None:
    """The request's `Idempotency-Key`, scoped by its method, its endpoint and `scope`, as
    `configure(idempotency_key=...)` takes it; None when the request has no such header.

    Args:
        request: the request being handled.
        scope: who the key belongs to, e.g. the authenticated user's id, so that two users
            sending the same key get a job each. None: the endpoint alone scopes it.
        header: the header to read.

    Raises:
        HTTPException: 400 for an empty header, one over 255 characters, one with a control
            character (a tab, DEL, NUL...), or one whose bytes are not UTF-8.

    Example:
        >>> key = idempotency_key(request, scope=request.user.identity)
        >>> job_id = await send_invoice.configure(idempotency_key=key).enqueue(order_id=7)
    """
    value = request.headers.get(header)
    if value is None:
        return None
    try:
        # Starlette decodes headers as Latin-1, a character per byte: the characters the client
        # sent are the bytes read as UTF-8, which also makes the limit count characters.
        value = value.encode("latin-1").decode()
    except UnicodeDecodeError:
        raise HTTPException(400, f"the {header} header must be UTF-8 text") from None
    if not 1 <= len(value) <= MAX_HEADER_LENGTH or _CONTROL.search(value):
        raise HTTPException(
            400, f"the {header} header must be 1 to {MAX_HEADER_LENGTH} printable characters"
        )
    # A JSON array cannot be read two ways: no scope and header value can pass for another.
    key = json.dumps(
        [request.method, _endpoint(request.scope), scope, value],
        ensure_ascii=False,
        separators=(",", ":"),
    )
    if len(key) > MAX_UNIQUE_KEY_LENGTH:
        key = "sha256:" + hashlib.sha256(key.encode()).hexdigest()
    return key


def _endpoint(scope: Mapping[str, Any]) -> str:
    """The route's path template, after the prefix it is mounted or included under (Starlette
    and FastAPI give the template, without it), else the endpoint function's name, else the
    request's path."""
    route = scope.get("route")
    if isinstance(route, Mount):
        # A plain ASGI app mounted: the mount's path is the root path already (it was counted
        # twice: "/hooks/hooks"), and the app has no routes of its own for a template.
        return str(scope.get("root_path", ""))
    path = getattr(route, "path", None)
    if isinstance(path, str):
        return _prefix(scope, route) + path
    endpoint = scope.get("endpoint")
    if endpoint is not None:
        name = getattr(endpoint, "__qualname__", type(endpoint).__qualname__)
        return f"{getattr(endpoint, '__module__', '')}.{name}"
    return str(scope.get("root_path", "")) + str(scope["path"])


def _prefix(scope: Mapping[str, Any], route: Any) -> str:
    """What comes before the route's own path: the root path of a `Mount` or a mounted app,
    and a router's prefix (FastAPI's `include_router(prefix=...)` leaves it out of both the
    template and the root path), found as the part of the request's path before the part the
    route matched. Without a pattern, the root path alone."""
    root = str(scope.get("root_path", ""))
    path = str(scope.get("path", ""))
    rest = path[len(root) :] if path.startswith(root) else path
    pattern = getattr(route, "path_regex", None)
    if pattern is None:
        return root
    for start in range(len(rest)):
        if rest[start] == "/" and _matched_here(route, pattern, rest[start:], scope):
            return root + rest[:start]
    return root


def _matched_here(
    route: Any, pattern: re.Pattern[str], tail: str, scope: Mapping[str, Any]
) -> bool:
    """Whether the route matched `tail`: the pattern matches it with the parameters the
    router found. The pattern alone is not enough: a `{x:path}` parameter matches the prefix
    too (`/{event:path}` matches all of `/stripe/push`, where the router gave it `push`)."""
    match = pattern.match(tail)
    if match is None:
        return False
    found = scope.get("path_params", {})
    convertors = getattr(route, "param_convertors", {})
    for name, text in match.groupdict().items():
        convertor = convertors.get(name)
        value = text if convertor is None else convertor.convert(text)
        if name in found and found[name] != value:
            return False
    return True
