from __future__ import annotations

import starlette_jobs


def test_exported_names_are_pinned() -> None:
    assert starlette_jobs.__all__ == [
        "ConfigurationError",
        "ConfiguredJob",
        "CorrelationIdMiddleware",
        "DatabaseUnavailableError",
        "EmbeddedPostgresUnavailable",
        "Job",
        "JobArgumentsError",
        "JobDefinitionError",
        "JobId",
        "JobNotFoundError",
        "JobRecord",
        "JobStatus",
        "Jobs",
        "MemoryStoreUnsupportedError",
        "NotStartedError",
        "Retry",
        "RunningJob",
        "SchemaVersionError",
        "StarletteJobsError",
        "UniqueKeyTakenError",
        "UnknownJobError",
        "__version__",
        "correlation_id",
        "current_job",
        "job",
    ]
    assert sorted(starlette_jobs.__all__) == starlette_jobs.__all__
    for name in starlette_jobs.__all__:
        assert hasattr(starlette_jobs, name)


def test_statuses_are_the_documented_strings() -> None:
    assert [s.value for s in starlette_jobs.JobStatus] == [
        "pending",
        "running",
        "succeeded",
        "failed",
        "cancelled",
    ]
