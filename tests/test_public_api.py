from __future__ import annotations
import __future__

import re
import types
from pathlib import Path

import starlette_jobs


def test_exported_names_are_pinned() -> None:
    assert starlette_jobs.__all__ == [
        "AddedSteps",
        "BulkRecord",
        "ConfigurationError",
        "ConfiguredJob",
        "CorrelationIdMiddleware",
        "DatabaseUnavailableError",
        "EmbeddedPostgresUnavailable",
        "EnqueuedWorkflow",
        "EventKind",
        "IdempotencyKeyReusedError",
        "Job",
        "JobArgumentsError",
        "JobCancelledError",
        "JobDefinitionError",
        "JobEvent",
        "JobFailedError",
        "JobId",
        "JobNotFoundError",
        "JobRecord",
        "JobResultError",
        "JobStatus",
        "Jobs",
        "JobsConfig",
        "LeaseLostError",
        "MemoryStoreUnsupportedError",
        "NotStartedError",
        "OnSuccessError",
        "OnSuccessMiddleware",
        "Queue",
        "QueueControls",
        "QueueLimits",
        "Retry",
        "RunningJob",
        "ScheduleDefinitionError",
        "ScheduleRecord",
        "SchemaVersionError",
        "StarletteJobsError",
        "StatusCounts",
        "Step",
        "StepNotRunningError",
        "StepRecord",
        "ThroughputMinute",
        "TickRecord",
        "TickStatus",
        "UniqueKeyTakenError",
        "UnknownJobError",
        "UnrunnableJobs",
        "UnstorableResultError",
        "UpstreamStepError",
        "WorkerRecord",
        "Workflow",
        "WorkflowDefinitionError",
        "WorkflowRecord",
        "WorkflowSummary",
        "__version__",
        "correlation_id",
        "current_job",
        "idempotency_key",
        "job",
        "periodic",
    ]
    assert sorted(starlette_jobs.__all__) == starlette_jobs.__all__
    for name in starlette_jobs.__all__:
        assert hasattr(starlette_jobs, name)


def test_every_public_name_of_the_package_is_exported() -> None:
    """A name imported into `__init__` but missing from `__all__` (or the other way round)."""
    public = {
        name
        for name, value in vars(starlette_jobs).items()
        if not name.startswith("_")
        and not isinstance(value, types.ModuleType)
        and not isinstance(value, __future__._Feature)  # `from __future__ import annotations`
    }
    assert public | {"__version__"} == set(starlette_jobs.__all__)


def test_the_dashboard_exports_its_app_and_the_package_does_not_import_it() -> None:
    """`starlette_jobs.dashboard` needs jinja2 (an extra): `import starlette_jobs` must not."""
    import starlette_jobs.dashboard

    assert starlette_jobs.dashboard.__all__ == ["Dashboard"]
    source = (Path(starlette_jobs.__file__).parent / "__init__.py").read_text("utf-8")
    assert "dashboard" not in source


def test_statuses_are_the_documented_strings() -> None:
    assert [s.value for s in starlette_jobs.JobStatus] == [
        "pending",
        "running",
        "succeeded",
        "failed",
        "cancelled",
        "waiting",
    ]


PACKAGE = Path(starlette_jobs.__file__).parent


def test_the_driver_is_imported_by_the_connections_and_their_errors_only() -> None:
    """asyncpg (and the errors it raises) stays behind `postgres/_connections.py` and
    `postgres/_driver_errors.py`: the rest of the library speaks the store protocol and the
    library's own errors."""
    importing = sorted(
        path.relative_to(PACKAGE).as_posix()
        for path in PACKAGE.rglob("*.py")
        if re.search(r"^\s*(import asyncpg|from asyncpg)", path.read_text(), re.MULTILINE)
    )
    assert importing == ["postgres/_connections.py", "postgres/_driver_errors.py"]
