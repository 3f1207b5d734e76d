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


async def workflow_checks(jobs: Jobs) -> None:
    """A workflow's steps are typed against their jobs' signatures, and what a step reads of
    the steps it waited for, against the type it names."""
    from starlette_jobs import EnqueuedWorkflow, Step, Workflow, WorkflowRecord, current_job

    flow = Workflow("typed")
    small = flow.add("small", resize, image_id=1, width=10)
    assert_type(small, Step[str])
    counted = flow.after(small).add("count", count_words, text="a b")
    assert_type(counted, Step[int])
    flow.add("bad", resize, image_id="1")  # type: ignore[call-overload]
    flow.after(small).add("bad2", count_words, words="a")  # type: ignore[call-overload]
    assert_type(await flow.enqueue(jobs=jobs), EnqueuedWorkflow)
    assert_type(await jobs.workflow(1), WorkflowRecord | None)
    me = current_job()
    assert me is not None
    assert_type(await me.upstream_result("small", str), str)
    assert_type(await me.upstream_results(int), dict[str, int])


async def complete_in_checks(session: AsyncSession) -> None:
    """`complete_in` takes the result of the type its job returns (an async job's, awaited)."""
    from starlette_jobs import current_job

    me = current_job()
    assert me is not None
    await me.complete_in(session, resize, "done")
    await me.complete_in(None, count_words, 3)
    await me.complete_in(session, resize, 3)  # type: ignore[misc]
    await me.complete_in(None, count_words, "3")  # type: ignore[arg-type]
    await me.complete_in("postgresql://", resize, "done")  # type: ignore[call-overload]


async def added_steps_checks() -> None:
    """The steps a running step adds are typed as a workflow's are."""
    from starlette_jobs import AddedSteps, EnqueuedWorkflow, Step, current_job

    me = current_job()
    assert me is not None
    more = me.extend_workflow()
    assert_type(more, AddedSteps)
    assert_type(more.add("small", resize, image_id=1, width=10), Step[str])
    assert_type(more.add_many("count", count_words, [{"text": "a"}]), list[Step[int]])
    more.add("bad", resize, image_id="1")  # type: ignore[call-overload]
    assert_type(await more.enqueue(), EnqueuedWorkflow)
