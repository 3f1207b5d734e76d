"""CSRF protection of the dashboard's forms: a random token in a cookie signed with the
dashboard's secret, and the same token in each form's hidden field; a POST is accepted only
when both are there, the cookie's signature holds, and they are equal (compared in constant
time). Another site can make a browser send the cookie, but cannot read it to fill the field;
a form the browser says came from another site is refused whatever it holds."""

from __future__ import annotations

import hashlib
import hmac
import secrets

from starlette.requests import Request
from starlette.responses import Response

COOKIE = "starlette_jobs_csrf"
FIELD = "csrf_token"

# What browsers send as Sec-Fetch-Site for a form of the dashboard's own pages ("none": typed
# or bookmarked). A sibling subdomain ("same-site") can plant a cookie and a field of its own
# that match each other: the header refuses its form, where the cookie alone cannot. Clients
# that send no header (curl, old browsers) rely on the token alone.
_OWN_FORMS = frozenset({"same-origin", "none"})


class CsrfTokens:
    """Issues and checks the tokens, signed with `secret`."""

    def __init__(self, secret: str | bytes) -> None:
        self._key = secret.encode() if isinstance(secret, str) else secret

    def _signature(self, token: str) -> str:
        return hmac.new(
            self._key, token.encode("utf-8", "surrogateescape"), hashlib.sha256
        ).hexdigest()

    def _signed_tokens(self, request: Request) -> list[str]:
        """The tokens of the request's cookies whose signature holds, among all it sent under
        the name (see `_cookies_named`)."""
        tokens = []
        for cookie in _cookies_named(request, COOKIE):
            token, _, signature = cookie.partition(".")
            # Compared as bytes: `compare_digest` raises on non-ASCII text, and a cookie of the
            # same name (another app on the host) may hold any byte.
            if token and hmac.compare_digest(
                signature.encode("utf-8", "surrogateescape"),
                self._signature(token).encode(),
            ):
                tokens.append(token)
        return tokens

    def from_cookie(self, request: Request) -> str | None:
        """The token of the request's first cookie whose signature holds."""
        return next(iter(self._signed_tokens(request)), None)

    def issue(self, request: Request) -> str:
        """The request's token, or a new one (set in the response's cookie by `keep`)."""
        return self.from_cookie(request) or secrets.token_urlsafe(32)

    def keep(self, request: Request, response: Response, token: str) -> None:
        """Sets the cookie of `token` on `response`, unless the request sent it already."""
        if self.from_cookie(request) == token:
            return
        response.set_cookie(
            COOKIE,
            f"{token}.{self._signature(token)}",
            path=request.scope.get("root_path", "") or "/",
            httponly=True,
            samesite="strict",
            secure=request.url.scheme == "https",
        )

    def accepts(self, request: Request, field: str | None) -> bool:
        """Whether a form's field matches the request's signed cookie, and the browser says
        the form was sent from this origin."""
        if request.headers.get("sec-fetch-site", "same-origin") not in _OWN_FORMS:
            return False
        if not field:
            return False
        # Any of them: two dashboards sharing the secret sign each other's cookies.
        return any(
            hmac.compare_digest(token.encode(), field.encode())
            for token in self._signed_tokens(request)
        )


def _cookies_named(request: Request, name: str) -> list[str]:
    """Every value the request's Cookie headers give `name`. Cookies ignore ports: a browser
    that opened a dashboard at / (another port, another secret) sends its cookie with this
    one's, both named alike, and Starlette's `request.cookies` keeps only the last."""
    found = []
    for header in request.headers.getlist("cookie"):
        for pair in header.split(";"):
            key, sep, value = pair.partition("=")
            if sep and key.strip() == name:
                found.append(value.strip())
    return found
