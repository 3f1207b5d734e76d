"""The example's jobs: a welcome email (simulated) and a CRM sync that fails twice first."""

from __future__ import annotations

import logging

from starlette_jobs import Retry, correlation_id, current_job, job

logger = logging.getLogger("example_app")


@job(queue="emails", retry=Retry.exponential(max_attempts=5, base_delay=1.0))
async def send_welcome_email(email: str, name: str) -> dict[str, str]:
    """Pretends to send an email; the return value is stored as the job's result."""
    logger.info("sending welcome email to %s <%s> (request %s)", name, email, correlation_id())
    return {"to": email, "subject": f"Welcome, {name}!"}


class CRMUnavailable(ConnectionError):
    pass


@job(retry=Retry.fixed(max_attempts=3, delay=0.5))
async def sync_to_crm(email: str) -> None:
    """Fails on its first two attempts, to show retries: see `GET /jobs/{id}` for its errors."""
    running = current_job()
    attempt = running.attempt if running else 1
    if attempt < 3:
        raise CRMUnavailable(f"CRM did not answer (attempt {attempt})")
    logger.info("synced %s to the CRM on attempt %d", email, attempt)
