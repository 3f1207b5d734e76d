"""Read by mypy only (never run): `enqueue` is typed against each job's own signature.

An unused `type: ignore` is itself an error under mypy --strict, so every ignore below proves
that the line it sits on is rejected by the type checker.
"""

from __future__ import annotations

from typing import assert_type

from sqlalchemy.ext.asyncio import AsyncSession
from starlette.requests import Request

from starlette_jobs import (
    ConfiguredJob,
    Job,
    JobId,
    JobRecord,
    Jobs,
    ScheduleRecord,
    TickRecord,
    idempotency_key,
    job,
    periodic,
)


@job
async def resize(image_id: int, width: int = 100) -> str:
    return f"{image_id}:{width}"


@job
def count_words(text: str) -> int:
    return len(text.split())


# `@periodic` hands the job back as it was: enqueue stays typed against its signature.
@periodic("0 9 * * *", timezone="Europe/Paris", arguments={"image_id": 1})
@job
async def thumbnail(image_id: int) -> str:
    return str(image_id)


@periodic("0 9 * * *", overlap="queue")  # type: ignore[arg-type]
@job
async def misconfigured() -> None: ...


async def checks(jobs: Jobs, request: Request, session: AsyncSession) -> None:
    assert isinstance(resize, Job)
    assert_type(await resize.enqueue(1, width=2), JobId)
    assert_type(await resize.enqueue(1, width=2), int)  # JobId is an int with bounds
    assert isinstance(resize.configure(delay=1.0), ConfiguredJob)
    assert_type(await resize.configure(delay=1.0).enqueue(image_id=3), JobId)
    assert_type(await jobs.get(1), JobRecord | None)
    assert_type(await resize.enqueue_many([{"image_id": 1}]), list[JobId])
    assert_type(await jobs.wait(1, timeout=5), JobRecord)
    # `result` is what the function returns: an async job's, once awaited.
    assert_type(await jobs.result(resize, 1, timeout=5), str)
    assert_type(await jobs.result(count_words, 1), int)
    await thumbnail.enqueue(image_id="x")  # type: ignore[arg-type]
    assert_type(await thumbnail.enqueue(image_id=2), JobId)
    assert_type(await jobs.schedules(), list[ScheduleRecord])
    assert_type(await jobs.ticks("thumbnail", limit=5), list[TickRecord])

    # A SQLAlchemy session joins as a transaction; the header is a key or None.
    key = idempotency_key(request, scope="user-1")
    assert_type(key, str | None)
    assert_type(await resize.configure(connection=session, idempotency_key=key).enqueue(1), JobId)
    await resize.configure(connection="postgresql://").enqueue(1)  # type: ignore[arg-type]

    await resize.enqueue("one")  # type: ignore[arg-type]
    await resize.enqueue(1, height=3)  # type: ignore[call-arg]
    await resize.enqueue()  # type: ignore[call-arg]
    await resize.configure(delay=1.0).enqueue(image_id="x")  # type: ignore[arg-type]
