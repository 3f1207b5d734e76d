"""`Jobs` settings: what is refused at construction, and what its repr shows."""

from __future__ import annotations

import math
from typing import Any

import pytest

from starlette_jobs import JobDefinitionError, Jobs
from starlette_jobs._dsn import masked_dsn
from starlette_jobs.cli._main import main

DAY = 24 * 3600.0


@pytest.mark.parametrize(
    ("settings", "phrase"),
    [
        # Every claim would fail ("interval out of range"), and shutdown would wait forever.
        ({"lease_duration": math.inf}, "lease_duration must be"),
        ({"lease_duration": DAY + 1}, "at most 86400"),
        ({"poll_interval": math.inf}, "poll_interval must be"),
        ({"poll_interval": 3601}, "at most 3600"),
        ({"shutdown_grace": math.nan}, "shutdown_grace must be"),
        ({"shutdown_grace": math.inf}, "shutdown_grace must be"),
        ({"shutdown_grace": DAY + 1}, "at most 86400"),
        ({"retention": math.inf}, "retention must be"),
        ({"retention": 101 * 365 * DAY}, "at most 3153600000"),
        ({"poll_interval": True}, "poll_interval must be"),
        ({"batch_size": True}, "batch_size must be at least 1 and at most 10000 \\(an integer\\)"),
        ({"batch_size": 2.5}, "batch_size must be at least 1 and at most 10000 \\(an integer\\)"),
        ({"batch_size": 10_001}, "at most 10000"),
        ({"pool_max_size": 1001}, "at most 1000 "),
        ({"max_payload_bytes": 2**31}, "max_payload_bytes must be at least 1 and at most 67108864"),
        ({"queues": {"default": True}}, "concurrency must be a positive integer"),
        ({"queues": {"default": 10_001}}, "at most 10000"),
        ({"migrate": 1}, "migrate must be True or False"),
        ({"require_database": "yes"}, "require_database must be True or False"),
        ({"dsn": 5432}, "dsn must be"),
    ],
)
def test_settings_out_of_range_are_refused_at_construction(
    settings: dict[str, Any], phrase: str
) -> None:
    with pytest.raises(JobDefinitionError, match=phrase):
        Jobs(**settings)


def test_the_largest_settings_allowed_are_accepted() -> None:
    jobs = Jobs(
        queues={"default": 10_000},
        batch_size=10_000,
        pool_max_size=1000,
        poll_interval=3600,
        lease_duration=DAY,
        shutdown_grace=DAY,
        retention=100 * 365 * DAY,
        max_payload_bytes=64 * 1024 * 1024,
    )
    assert jobs.config.lease_duration == DAY


def test_a_cli_setting_out_of_range_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    args = ["worker", "tests.integration.cli_app:jobs", "--dsn", "postgresql://localhost/x"]
    assert main([*args, "--shutdown-grace", "nan"]) == 2
    assert "shutdown_grace must be" in capsys.readouterr().err


def test_the_password_of_the_dsn_is_never_shown() -> None:
    jobs = Jobs("postgresql://app:s3cret@db.example:5432/jobs?sslmode=require")
    assert "s3cret" not in repr(jobs.config)
    assert "postgresql://app:***@db.example:5432/jobs?sslmode=require" in repr(jobs.config)
    assert "s3cret" not in repr(jobs.replace(queues={}).config)


@pytest.mark.parametrize(
    ("dsn", "shown"),
    [
        ("postgresql://app:s3cret@host/db", "postgresql://app:***@host/db"),
        ("postgresql://app:p@ss@db/app", "postgresql://app:***@db/app"),  # an unencoded "@"
        ("postgres://app:p%40ss@host:5433/db", "postgres://app:***@host:5433/db"),
        ("postgresql://app@host/db", "postgresql://app@host/db"),
        ("postgresql://host/db?user=app&password=s3cret", "postgresql://host/db?user=app&password=***"),
        ("host=db password=s3cret dbname=jobs", "host=db password=*** dbname=jobs"),
        ("host=db password = 's3 cret' dbname=jobs", "host=db password=*** dbname=jobs"),
        ("postgresql://:s3cret@/db?host=/run/pg", "postgresql://:***@/db?host=/run/pg"),
    ],
)  # fmt: skip
def test_masked_dsn_hides_every_form_of_password(dsn: str, shown: str) -> None:
    assert masked_dsn(dsn) == shown
