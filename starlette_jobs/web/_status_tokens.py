"""Status URLs that cannot be guessed: a job's id and an HMAC of it, as one opaque token.

Job ids are sequential, so `/jobs/41` tells anyone where `/jobs/42` is. A token carries the id
and a 128-bit HMAC-SHA256 of it under the app's secret, so only the server can make one: the
status routes accept nothing else, and no schema change is needed (the token is never stored).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac

MIN_SECRET_BYTES = 32
"""As long as the HMAC-SHA256 key that `secrets.token_urlsafe(32)` makes, at least."""

_ID_BYTES = 8  # ids are 1 to 2**63-1
_MAC_BYTES = 16  # 128 bits: no one guesses that, online or off
_TOKEN_CHARS = 32  # 24 bytes are exactly 32 characters of base64, with no padding
# So that a MAC made here means nothing to another use of the same secret.
_CONTEXT = b"starlette_jobs job status URL\x00"


class JobStatusTokens:
    """Opaque tokens for the job status URLs, in place of the row ids (which are sequential,
    so that whoever has one status URL can guess the others).

    Pass the same instance to the status routes (`job_status_router(tokens=...)` or
    `add_job_status_routes(app, tokens=...)`) and to `accepted(request, job_id, tokens=...)`:
    `Location` then holds `/jobs/<token>`, and the routes answer 404 to anything but a token
    made with this secret. A token does not expire: it opens its job's status for as long as
    the job is kept and the secret is unchanged (changing the secret voids every token).

    Args:
        secret: the app's secret, at least 32 bytes (`secrets.token_urlsafe(32)`), kept out of
            the code (an environment variable, a secrets manager). Every process serving the
            routes needs the same one.

    Raises:
        ValueError: a secret shorter than 32 bytes.

    Example:
        >>> tokens = JobStatusTokens(os.environ["JOB_STATUS_SECRET"])
        >>> app.mount("/jobs", job_status_router(tokens=tokens))
        >>> return accepted(request, job_id, tokens=tokens)  # in a handler
    """

    __slots__ = ("_key",)

    def __init__(self, secret: str | bytes) -> None:
        key = secret.encode() if isinstance(secret, str) else bytes(secret)
        if len(key) < MIN_SECRET_BYTES:
            raise ValueError(
                f"the secret of JobStatusTokens must be at least {MIN_SECRET_BYTES} bytes, got "
                f"{len(key)}: make one with `python -c 'import secrets; "
                "print(secrets.token_urlsafe(32))'`"
            )
        self._key = key

    def __repr__(self) -> str:
        return "JobStatusTokens(<secret>)"  # never the secret, in a log or a traceback

    def token(self, job_id: int) -> str:
        """The token of the job `job_id`: 32 URL-safe characters.

        Raises:
            ValueError: `job_id` is no possible job id.
        """
        if type(job_id) is not int or not 1 <= job_id < 2**63:
            raise ValueError(f"no job can have the id {job_id!r}")
        packed = job_id.to_bytes(_ID_BYTES, "big")
        return base64.urlsafe_b64encode(packed + self._mac(packed)).decode()

    def job_id(self, token: str) -> int | None:
        """The job id `token` was made for, or None if this secret made no such token."""
        if len(token) != _TOKEN_CHARS:
            return None
        try:
            raw = base64.b64decode(token, altchars=b"-_", validate=True)
        except (binascii.Error, ValueError):  # not base64 (or not ASCII at all)
            return None
        packed, mac = raw[:_ID_BYTES], raw[_ID_BYTES:]
        if not hmac.compare_digest(mac, self._mac(packed)):
            return None
        return int.from_bytes(packed, "big")

    def _mac(self, packed: bytes) -> bytes:
        return hmac.new(self._key, _CONTEXT + packed, hashlib.sha256).digest()[:_MAC_BYTES]
