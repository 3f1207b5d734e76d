"""`JobsConfig`: everything `Jobs(...)` was given, checked for range when it is built."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from opentelemetry.metrics import MeterProvider
from opentelemetry.trace import TracerProvider

from ._dsn import masked_dsn
from ._errors import JobDefinitionError
from ._job import check_queue_name
from ._queue import Queue
from .postgres._embedded import DEFAULT_DATA_DIR
from .postgres._schema import check_schema_name

DAY = 24 * 3600.0


@dataclass(frozen=True, slots=True, repr=False)
class JobsConfig:
    """Everything `Jobs(...)` was given; see `Jobs` for the meaning of each field."""

    dsn: str | None = None
    queues: Mapping[str, int | Queue] = field(default_factory=lambda: {"default": 10})
    batch_size: int = 100
    poll_interval: float = 1.0
    lease_duration: float = 30.0
    shutdown_grace: float = 10.0
    migrate: bool = True
    embedded_data_dir: Path = DEFAULT_DATA_DIR
    tracer_provider: TracerProvider | None = None
    meter_provider: MeterProvider | None = None
    pool_max_size: int = 10
    retention: float | None = 7 * DAY
    max_payload_bytes: int = 1024 * 1024
    require_database: bool = False
    events: bool = True
    protect_event_loop: bool | None = None
    loop_lag_target: float = 0.001
    schema: str | None = None
    unknown_job_grace: float = 600.0

    def __post_init__(self) -> None:
        check_schema_name(self.schema)
        if self.dsn is not None and not isinstance(self.dsn, str):
            raise JobDefinitionError(f"dsn must be a PostgreSQL URL or None, got {self.dsn!r}")
        for queue, declared in self.queues.items():
            check_queue_name(queue)
            if isinstance(declared, Queue):
                continue  # checked when it was built
            if type(declared) is not int or not 1 <= declared <= _MAX_CONCURRENCY:
                raise JobDefinitionError(
                    f"queue {queue!r}: concurrency must be a positive integer, at most "
                    f"{_MAX_CONCURRENCY}, or a Queue(...), got {declared!r}"
                )
        for name, most in _INTEGER_BOUNDS.items():
            value: object = getattr(self, name)
            # A bool is an int to Python, and almost certainly a mistake here.
            if type(value) is not int or not 1 <= value <= most:
                raise JobDefinitionError(
                    f"{name} must be at least 1 and at most {most} (an integer), got {value!r}"
                )
        for name, limit in _SECONDS_BOUNDS.items():
            seconds: object = getattr(self, name)
            if name == "retention" and seconds is None:
                continue
            # Comparisons that NaN fails, so that it is refused too.
            zero_allowed = name in ("shutdown_grace", "unknown_job_grace")
            if (
                isinstance(seconds, bool)
                or not isinstance(seconds, int | float)
                or not ((seconds >= 0) if zero_allowed else (seconds > 0))
                or not seconds <= limit
            ):
                extra = ", or None to keep every job" if name == "retention" else ""
                kind = (
                    "a number of seconds >= 0" if zero_allowed else "a positive number of seconds"
                )
                raise JobDefinitionError(
                    f"{name} must be {kind}, at most {limit:.0f}{extra}, got {seconds!r}"
                )
        for name in ("migrate", "require_database", "events", "protect_event_loop"):
            if name == "protect_event_loop" and self.protect_event_loop is None:
                continue
            if not isinstance(getattr(self, name), bool):
                extra = ", or None" if name == "protect_event_loop" else ""
                raise JobDefinitionError(
                    f"{name} must be True or False{extra}, got {getattr(self, name)!r}"
                )

    def __repr__(self) -> str:
        # The DSN's password must not reach a log line or a traceback.
        shown = {name: getattr(self, name) for name in self.__dataclass_fields__}
        if self.dsn:
            shown["dsn"] = masked_dsn(self.dsn)
        return f"JobsConfig({', '.join(f'{name}={value!r}' for name, value in shown.items())})"


# The upper bounds of the settings, chosen far beyond any sensible value: they exist to refuse
# what the database or asyncio cannot take (an infinite lease makes every claim fail, a NaN
# grace makes shutdown wait forever), not to second-guess a deployment.
_MAX_CONCURRENCY = 10_000
_INTEGER_BOUNDS = {"batch_size": 10_000, "pool_max_size": 1000, "max_payload_bytes": 64 * 1024**2}
_SECONDS_BOUNDS = {
    "poll_interval": 3600.0,
    "lease_duration": DAY,
    "shutdown_grace": DAY,
    "retention": 100 * 365 * DAY,
    "loop_lag_target": 60.0,
    "unknown_job_grace": 100 * 365 * DAY,
}
