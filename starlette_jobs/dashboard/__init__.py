"""The operator's dashboard: an ASGI app to mount in a Starlette or FastAPI app
(`app.mount("/jobs", Dashboard(jobs))`), server-rendered from the templates and the CSS shipped
beside it. It reads jobs only through `Jobs` and its records, never a store; it needs jinja2
(the `dashboard` extra)."""

from __future__ import annotations

from ._app import Dashboard as Dashboard

__all__ = ["Dashboard"]
