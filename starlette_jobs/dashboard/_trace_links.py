"""The link from a job's page to its trace, in whatever shows traces (Jaeger, Tempo,
Honeycomb...): a URL template the user sets, `{trace_id}` where the id goes."""

from __future__ import annotations

from urllib.parse import urlsplit

PLACEHOLDER = "{trace_id}"


class TraceLinks:
    """`Dashboard(trace_url=...)`, checked once, when the dashboard is built.

    Raises:
        ValueError: a template without `{trace_id}`, or not an http(s) URL (a `javascript:`
            link would run in the operator's session).
    """

    def __init__(self, template: str | None) -> None:
        if template is not None:
            if PLACEHOLDER not in template:
                raise ValueError(f"trace_url must hold {PLACEHOLDER}, got {template!r}")
            if urlsplit(template).scheme not in ("http", "https"):
                raise ValueError(f"trace_url must be an http or https URL, got {template!r}")
        self._template = template

    def link(self, trace_id: str | None) -> str | None:
        """The trace's URL; None with no template or no trace. A trace id is 32 hex digits
        (`JobRecord.trace_id`), nothing to escape; replaced, not `format`ted, so that other
        braces in the template (a Honeycomb query) stay as they are."""
        if self._template is None or trace_id is None:
            return None
        return self._template.replace(PLACEHOLDER, trace_id)
