"""The CSRF tokens of the dashboard's forms: a signed cookie and a field that must match it."""

from __future__ import annotations

import pytest
from starlette.requests import Request
from starlette.responses import Response

from starlette_jobs.dashboard._csrf import COOKIE, CsrfTokens


def request_with(
    cookie: str | None = None, *, root_path: str = "/ops", scheme: str = "http"
) -> Request:
    headers = [] if cookie is None else [(b"cookie", f"{COOKIE}={cookie}".encode())]
    scope = {
        "type": "http",
        "method": "GET",
        "path": "/ops/",
        "root_path": root_path,
        "scheme": scheme,
        "server": ("test", 80),
        "headers": headers,
        "query_string": b"",
    }
    return Request(scope)


def issued_cookie(tokens: CsrfTokens, request: Request) -> tuple[str, str]:
    """The token issued for `request`, and the Set-Cookie header that carries it."""
    token = tokens.issue(request)
    response = Response()
    tokens.keep(request, response, token)
    return token, response.headers["set-cookie"]


def test_a_new_visitor_gets_a_signed_cookie_on_the_mount_only() -> None:
    token, header = issued_cookie(CsrfTokens("secret"), request_with())
    assert header.startswith(f"{COOKIE}={token}.")
    assert "Path=/ops" in header
    assert "HttpOnly" in header
    assert "SameSite=strict" in header
    assert "Secure" not in header


def test_over_https_the_cookie_is_secure() -> None:
    _, header = issued_cookie(CsrfTokens("secret"), request_with(scheme="https"))
    assert "Secure" in header


def test_the_token_of_the_cookie_is_kept_and_matches_the_field() -> None:
    tokens = CsrfTokens(b"secret")
    token, header = issued_cookie(tokens, request_with())
    returning = request_with(header.split(";")[0].split("=", 1)[1])
    assert tokens.issue(returning) == token
    response = Response()
    tokens.keep(returning, response, token)
    assert "set-cookie" not in response.headers  # not sent again
    assert tokens.accepts(returning, token)
    assert not tokens.accepts(returning, token[:-1])
    assert not tokens.accepts(returning, None)


def test_a_cookie_not_signed_with_the_secret_is_no_token() -> None:
    token, header = issued_cookie(CsrfTokens("one"), request_with())
    cookie = header.split(";")[0].split("=", 1)[1]
    other = CsrfTokens("two")
    assert other.from_cookie(request_with(cookie)) is None
    assert not other.accepts(request_with(cookie), token)
    assert other.from_cookie(request_with(f"{token}.")) is None
    assert other.from_cookie(request_with(token)) is None
    assert other.issue(request_with(cookie)) != token  # a fresh one


def test_a_cookie_of_bytes_no_token_holds_is_no_token() -> None:
    # A browser sends back whatever another app on the host set under the name: non-ASCII
    # bytes must be read as no token (a fresh one issued), not fail the page.
    tokens = CsrfTokens("secret")
    for cookie in ("a.\u00e9", "\u00e9.abc", "a.b.c"):
        assert tokens.from_cookie(request_with(cookie)) is None
        assert not tokens.accepts(request_with(cookie), "a")
        assert tokens.issue(request_with(cookie))


@pytest.mark.parametrize("ours_first", [True, False])
def test_a_dashboard_under_a_path_finds_its_cookie_beside_another_dashboards(
    ours_first: bool,
) -> None:
    # Cookies ignore ports: once the operator opened a dashboard mounted at / (another port,
    # another secret), the browser sends its cookie with the /jobs dashboard's, both named
    # alike. Starlette's request.cookies keeps only one of them.
    ours, other = CsrfTokens("ours"), CsrfTokens("other")
    token, header = issued_cookie(ours, request_with(root_path="/jobs"))
    _, other_header = issued_cookie(other, request_with(root_path=""))
    pair = [header.split(";")[0], other_header.split(";")[0]]
    raw = "; ".join(pair if ours_first else pair[::-1])
    scope = {**request_with().scope, "headers": [(b"cookie", raw.encode())]}
    both = Request(scope)
    assert ours.accepts(both, token)
    assert ours.issue(both) == token
    response = Response()
    ours.keep(both, response, token)
    assert "set-cookie" not in response.headers  # the page's form keeps working
