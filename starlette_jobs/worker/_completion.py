"""A job that writes its own success in the transaction that does its work
(`current_job().complete_in`, docs/transactions.md): its result made storable, and the store's
`complete_job` called under the attempt's lease token."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any
from uuid import UUID

from .._attempt_records import Claim
from .._errors import JobDefinitionError, LeaseLostError
from .._storable import MAX_RESULT_BYTES, storable_json

if TYPE_CHECKING:
    from .._job import Job

Completer = Callable[[int, UUID, "str | None", Any], Awaitable[None]]
"""`Store.complete_job`, as the worker hands it to each attempt."""


async def complete(
    completer: Completer | None,
    claim: Claim | None,
    running: str,
    connection: Any,
    job: Job[..., Any],
    result: object,
) -> None:
    """Writes the success of the attempt of `claim` (the job named `running`) with `result`,
    in the transaction of `connection` (None: at once).

    Raises:
        JobDefinitionError: `job` is not the job running.
        ValueError: `result` cannot be stored (as `report_progress` says why); nothing written.
        LeaseLostError: the attempt no longer holds its job, or there is no attempt (no worker
            runs this job); nothing written.
    """
    if job.name != running:
        raise JobDefinitionError(
            f"complete_in names the job {job.name!r}, but the job running is {running!r}: "
            "pass the job whose code this is (its result type is the one checked)"
        )
    if completer is None or claim is None:
        raise LeaseLostError(
            f"job {running!r} runs outside a worker (called inline, or its RunningJob made by "
            "hand): it holds no lease to complete the job under"
        )
    try:
        text = None if result is None else storable_json(result, MAX_RESULT_BYTES).decode()
    except ValueError as error:
        raise ValueError(f"job {claim.id}: result not storable: {error}") from None
    await completer(claim.id, claim.lease_token, text, connection)
