"""What users get back when they look at jobs: `JobStatus` and `JobRecord`."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from datetime import datetime
from enum import StrEnum
from typing import Any


class JobStatus(StrEnum):
    """A job's status, as stored in the row. A job waiting for a retry is `PENDING`."""

    PENDING = "pending"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"


@dataclass(frozen=True, slots=True)
class JobRecord:
    """One job row, as `Jobs.get` and `Jobs.list` return it."""

    id: int
    name: str
    queue: str
    status: JobStatus
    arguments: dict[str, Any]
    priority: int
    attempts: int
    max_attempts: int
    run_at: datetime
    created_at: datetime
    started_at: datetime | None
    finished_at: datetime | None
    last_error: str | None
    errors: list[dict[str, Any]]
    """One entry per failed attempt: `attempt`, `error`, `at`, `worker_id`."""
    worker_id: str | None
    result: Any

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> JobRecord:
        return cls(
            id=row["id"],
            name=row["name"],
            queue=row["queue"],
            status=JobStatus(row["status"]),
            arguments=json.loads(row["payload"]),
            priority=row["priority"],
            attempts=row["attempts"],
            max_attempts=row["max_attempts"],
            run_at=row["run_at"],
            created_at=row["created_at"],
            started_at=row["started_at"],
            finished_at=row["finished_at"],
            last_error=row["last_error"],
            errors=json.loads(row["errors"]),
            worker_id=row["worker_id"],
            result=None if row["result"] is None else json.loads(row["result"]),
        )

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (timestamps as ISO 8601 strings), e.g. for a JSONResponse."""
        data = asdict(self)
        for key, value in data.items():
            if isinstance(value, datetime):
                data[key] = value.isoformat()
        data["status"] = self.status.value
        return data
