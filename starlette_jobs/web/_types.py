"""The types the status routes take: what they show of a job, and who may see it."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from .._records import JobRecord

PublicFields = Callable[[JobRecord], Mapping[str, Any]]
"""What the status route shows of a job: a function of its record to a JSON-ready mapping."""


Authorize = Callable[[Request, JobRecord], bool | Awaitable[bool]]
"""Whether this request may see this job (sync or async): a job it may not see answers 404 on
the status route and the event stream, exactly as a job that does not exist."""


Endpoint = Callable[[Request], Awaitable[Response]]
