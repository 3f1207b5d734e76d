"""`JobsConfig` on its own: its defaults, what it refuses as it is built, and its repr. The
range of each setting, as `Jobs(...)` refuses it, is in test_jobs.py."""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path
from typing import Any

import pytest

from starlette_jobs import JobDefinitionError, JobsConfig


def test_the_defaults() -> None:
    config = JobsConfig()
    assert config.dsn is None
    assert dict(config.queues) == {"default": 10}
    assert (config.batch_size, config.poll_interval, config.lease_duration) == (100, 1.0, 30.0)
    assert (config.shutdown_grace, config.retention) == (10.0, 7 * 24 * 3600.0)
    assert (config.migrate, config.require_database, config.events) == (True, False, True)
    assert config.embedded_data_dir == Path(".starlette_jobs") / "pgdata"
    assert config.max_payload_bytes == 1024 * 1024
    assert (config.protect_event_loop, config.loop_lag_target) == (None, 0.001)


def test_each_config_has_its_own_default_queues() -> None:
    first, second = JobsConfig(), JobsConfig()
    assert first.queues is not second.queues


def test_a_config_cannot_be_changed_once_built() -> None:
    config = JobsConfig()
    with pytest.raises(dataclasses.FrozenInstanceError):
        config.batch_size = 5  # type: ignore[misc]


def test_replace_checks_the_new_values_too() -> None:
    with pytest.raises(JobDefinitionError, match="batch_size must be at least 1"):
        dataclasses.replace(JobsConfig(), batch_size=0)


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"queues": {"bad queue": 1}}, "queue"),
        ({"queues": {"default": 0}}, "queue 'default': concurrency must be a positive integer"),
        ({"lease_duration": 0}, "lease_duration must be a positive number of seconds"),
        ({"poll_interval": -1.0}, "poll_interval must be a positive number of seconds"),
        ({"lease_duration": math.nan}, "lease_duration must be"),
        ({"shutdown_grace": -0.1}, "shutdown_grace must be a number of seconds >= 0"),
        ({"retention": 0}, "or None to keep every job, got 0"),
        ({"lease_duration": "30"}, "got '30'"),
        ({"batch_size": 0}, "batch_size must be at least 1 and at most 10000 (an integer), got 0"),
        ({"events": 0}, "events must be True or False, got 0"),
        ({"events": "no"}, "events must be True or False, got 'no'"),
        ({"protect_event_loop": 1}, "protect_event_loop must be True or False, or None, got 1"),
        ({"loop_lag_target": 0}, "loop_lag_target must be a positive number of seconds"),
        ({"loop_lag_target": math.nan}, "loop_lag_target must be"),
        ({"loop_lag_target": 61}, "at most 60"),
    ],
)
def test_refused_settings_name_the_setting_and_the_value(
    settings: dict[str, Any], message: str
) -> None:
    with pytest.raises(JobDefinitionError) as refused:
        JobsConfig(**settings)
    assert message in str(refused.value)


def test_the_lowest_values_allowed_are_accepted() -> None:
    config = JobsConfig(
        queues={"a": 1, "b.c-d_e": 1},
        batch_size=1,
        poll_interval=0.001,
        lease_duration=0.001,
        shutdown_grace=0,
        retention=None,
        pool_max_size=1,
        max_payload_bytes=1,
    )
    assert (config.shutdown_grace, config.retention) == (0, None)


def test_an_empty_set_of_queues_is_a_process_that_runs_no_worker() -> None:
    assert dict(JobsConfig(queues={}).queues) == {}


def test_the_repr_shows_every_setting_but_masks_the_password() -> None:
    shown = repr(JobsConfig(dsn="postgresql://app:s3cret@db/jobs", batch_size=7))
    assert "s3cret" not in shown
    assert shown.startswith("JobsConfig(dsn='postgresql://app:***@db/jobs', queues={'default': 10}")
    assert "batch_size=7" in shown
    assert "require_database=False, events=True, protect_event_loop=None" in shown
    assert [field.name for field in dataclasses.fields(JobsConfig)] == [
        part.split("=")[0] for part in shown.removeprefix("JobsConfig(").split(", ") if "=" in part
    ]


def test_the_repr_of_a_config_without_a_dsn() -> None:
    assert repr(JobsConfig()).startswith("JobsConfig(dsn=None, ")
