"""How the duties that try again and again (the worker's claims, lease renewals, upkeep and
heartbeat...; a wait for a job's outcome) say that they fail, and that they work again.

Each of them tries again on its own every second or few, for as long as the database stays away.
Said on every try, an outage of an hour was thousands of identical warnings, a dozen a second
from one worker, in which its start and its end were hard to find. So a duty says a failure
once per run of failures, and each other kind of failure in that run once too; the repeats go
to DEBUG; and the first success after them says how many tries failed. All the database's
unavailability (`DatabaseUnavailableError`: refused, reset, silent...) is one kind, whatever its
text, since its text changes as a server stops and starts again; any other error is a kind per
type and text, logged with its traceback.
"""

from __future__ import annotations

import logging

from ._errors import DatabaseUnavailableError

_UNAVAILABLE = "the database is unavailable"


class FailureLog:
    """The log of one recurring duty, named by `what` ("renewing leases"): call `failed(error)`
    in its `except` block and `succeeded()` after each try that did not raise."""

    def __init__(self, logger: logging.Logger, what: str) -> None:
        self._logger = logger
        self._what = what
        self._said: set[str] = set()  # the kinds said in this run of failures
        self._failures = 0

    def failed(self, error: Exception) -> None:
        self._failures += 1
        if isinstance(error, DatabaseUnavailableError):
            kind = _UNAVAILABLE
        else:
            kind = f"{type(error).__qualname__}: {error}"
        if kind in self._said:
            self._logger.debug("%s failed again, retrying: %s", self._what, error)
            return
        self._said.add(kind)
        if kind is _UNAVAILABLE:
            self._logger.warning("%s failed, retrying: %s", self._what, error)
        else:
            self._logger.error("%s failed, retrying", self._what, exc_info=error)

    def succeeded(self) -> None:
        if self._failures:
            self._logger.info(
                "%s works again, after %d failed tr%s",
                self._what, self._failures, "y" if self._failures == 1 else "ies",
            )  # fmt: skip
            self._said.clear()
            self._failures = 0
