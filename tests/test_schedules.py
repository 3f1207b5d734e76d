"""`@periodic`: declaring a schedule on a job, what is refused at declaration, and the
definition a worker stores and compares."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from starlette_jobs import ScheduleDefinitionError, job, periodic
from starlette_jobs._schedules import forget_schedule, registered_schedules


@job(name="tests.schedules.report", queue="reports")
async def report(kind: str, days: int = 1) -> None:
    pass


def schedules() -> dict[str, Any]:
    return {s.name: s for s in registered_schedules()}


def test_a_schedule_is_declared_on_a_job_and_named_after_it() -> None:
    @periodic("0 9 * * MON-FRI", timezone="Europe/Paris", arguments={"kind": "sales"})
    @job(name="tests.schedules.morning", queue="reports")
    async def morning(kind: str) -> None:
        pass

    schedule = schedules()["tests.schedules.morning"]
    assert schedule.job is morning
    assert (schedule.cron.expression, schedule.cron.timezone) == ("0 9 * * MON-FRI", "Europe/Paris")
    assert (schedule.catch_up, schedule.overlap) == ("latest", "allow")
    assert schedule.definition() == {
        "job": "tests.schedules.morning",
        "queue": "reports",
        "cron": "0 9 * * MON-FRI",
        "timezone": "Europe/Paris",
        "arguments": {"kind": "sales"},
        "catch_up": "latest",
        "overlap": "allow",
        "priority": 0,
        "max_attempts": morning.retry.max_attempts,
    }


def test_several_schedules_of_one_job_need_names_of_their_own() -> None:
    periodic("0 6 * * *", name="tests.schedules.daily", arguments={"kind": "daily"})(report)
    periodic("0 7 * * MON", name="tests.schedules.weekly", arguments={"kind": "weekly"})(report)
    assert {"tests.schedules.daily", "tests.schedules.weekly"} <= schedules().keys()
    periodic("0 8 * * *", arguments={"kind": "x"})(report)
    with pytest.raises(ScheduleDefinitionError, match="two schedules named"):
        periodic("0 9 * * *", arguments={"kind": "y"})(report)


def test_a_name_taken_by_another_jobs_schedule_is_refused() -> None:
    periodic("0 6 * * *", name="tests.schedules.taken", arguments={"kind": "a"})(report)

    @job(name="tests.schedules.other")
    async def other() -> None:
        pass

    with pytest.raises(ScheduleDefinitionError, match="two schedules are named"):
        periodic("0 6 * * *", name="tests.schedules.taken")(other)


def test_the_same_declaration_again_replaces_it() -> None:
    # A module imported again (or a test defining its job again) declares the same schedule.
    for hour in (6, 7):

        @periodic(f"0 {hour} * * *")
        @job(name="tests.schedules.reloaded")
        async def reloaded() -> None:
            pass

    assert schedules()["tests.schedules.reloaded"].cron.expression == "0 7 * * *"


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"cron": "0 25 * * *"}, "bad cron expression '0 25 \\* \\* \\*'"),
        ({"timezone": "Europe/Pariss"}, "unknown time zone 'Europe/Pariss'"),
        ({"catch_up": "all"}, "catch_up must be 'none', 'latest' or a timedelta"),
        ({"catch_up": timedelta(0)}, "a catch_up window must be positive"),
        ({"overlap": "queue"}, "overlap must be one of 'allow', 'skip', 'one_waiting'"),
        ({"arguments": {"kind": 3}}, "kind: Input should be a valid string"),
        ({"arguments": {}}, "kind: Field required"),
        ({"arguments": {"kind": "a", "extra": 1}}, "extra"),
        ({"name": "bad name!"}, "invalid schedule name 'bad name!'"),
    ],
)
def test_a_bad_declaration_is_refused_at_once(options: dict[str, Any], message: str) -> None:
    cron = options.pop("cron", "0 6 * * *")
    options.setdefault("arguments", {"kind": "a"})
    with pytest.raises(ScheduleDefinitionError, match=message):
        periodic(cron, **options)(report)


def test_periodic_goes_above_job() -> None:
    async def plain() -> None:
        pass

    with pytest.raises(ScheduleDefinitionError, match="@periodic goes above @job"):
        periodic("0 6 * * *")(plain)  # type: ignore[type-var]


def test_the_hash_tells_definitions_apart() -> None:
    periodic("0 6 * * *", name="tests.schedules.hashed", arguments={"kind": "a"})(report)
    first = schedules()["tests.schedules.hashed"].declared()
    assert first == schedules()["tests.schedules.hashed"].declared()
    forget_schedule("tests.schedules.hashed")
    periodic("0 6 * * *", name="tests.schedules.hashed", arguments={"kind": "b"})(report)
    second = schedules()["tests.schedules.hashed"].declared()
    assert second.definition_hash != first.definition_hash
    assert '"kind":"b"' in second.definition
    forget_schedule("tests.schedules.hashed")
    assert "tests.schedules.hashed" not in schedules()
