"""Durable background jobs for Starlette applications, stored in PostgreSQL."""

from __future__ import annotations

from ._added_steps import AddedSteps as AddedSteps
from ._bulk_records import BulkRecord as BulkRecord
from ._config import JobsConfig as JobsConfig
from ._correlation import correlation_id as correlation_id
from ._count_records import StatusCounts as StatusCounts
from ._errors import ConfigurationError as ConfigurationError
from ._errors import DatabaseUnavailableError as DatabaseUnavailableError
from ._errors import EmbeddedPostgresUnavailable as EmbeddedPostgresUnavailable
from ._errors import IdempotencyKeyReusedError as IdempotencyKeyReusedError
from ._errors import JobArgumentsError as JobArgumentsError
from ._errors import JobCancelledError as JobCancelledError
from ._errors import JobDefinitionError as JobDefinitionError
from ._errors import JobFailedError as JobFailedError
from ._errors import JobNotFoundError as JobNotFoundError
from ._errors import JobResultError as JobResultError
from ._errors import LeaseLostError as LeaseLostError
from ._errors import MemoryStoreUnsupportedError as MemoryStoreUnsupportedError
from ._errors import NotStartedError as NotStartedError
from ._errors import OnSuccessError as OnSuccessError
from ._errors import ScheduleDefinitionError as ScheduleDefinitionError
from ._errors import SchemaVersionError as SchemaVersionError
from ._errors import StarletteJobsError as StarletteJobsError
from ._errors import StepNotRunningError as StepNotRunningError
from ._errors import UniqueKeyTakenError as UniqueKeyTakenError
from ._errors import UnknownJobError as UnknownJobError
from ._errors import UnstorableResultError as UnstorableResultError
from ._errors import UpstreamStepError as UpstreamStepError
from ._errors import WorkflowDefinitionError as WorkflowDefinitionError
from ._job import ConfiguredJob as ConfiguredJob
from ._job import Job as Job
from ._job import JobId as JobId
from ._job import job as job
from ._jobs import Jobs as Jobs
from ._queue import Queue as Queue
from ._queue import QueueControls as QueueControls
from ._queue import QueueLimits as QueueLimits
from ._records import EventKind as EventKind
from ._records import JobEvent as JobEvent
from ._records import JobRecord as JobRecord
from ._records import JobStatus as JobStatus
from ._retry import Retry as Retry
from ._schedule_records import ScheduleRecord as ScheduleRecord
from ._schedule_records import TickRecord as TickRecord
from ._schedule_records import TickStatus as TickStatus
from ._schedules import periodic as periodic
from ._throughput_records import ThroughputMinute as ThroughputMinute
from ._version import __version__ as __version__
from ._worker_records import UnrunnableJobs as UnrunnableJobs
from ._worker_records import WorkerRecord as WorkerRecord
from ._workflow_records import EnqueuedWorkflow as EnqueuedWorkflow
from ._workflow_records import StepRecord as StepRecord
from ._workflow_records import WorkflowRecord as WorkflowRecord
from ._workflow_records import WorkflowSummary as WorkflowSummary
from ._workflows import Step as Step
from ._workflows import Workflow as Workflow
from .web._correlation import CorrelationIdMiddleware as CorrelationIdMiddleware
from .web._idempotency import idempotency_key as idempotency_key
from .web._on_success import OnSuccessMiddleware as OnSuccessMiddleware
from .worker._context import RunningJob as RunningJob
from .worker._context import current_job as current_job

__all__ = [
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
