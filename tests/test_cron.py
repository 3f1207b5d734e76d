"""`_cron`: when a schedule ticks (daylight-saving transitions included), and which ticks a round
records under each catch-up policy. Pure: the clock is an argument."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from starlette_jobs import ScheduleDefinitionError
from starlette_jobs._cron import MAX_TICKS_PER_ROUND, Cron, PlannedTick, plan_ticks

PARIS = ZoneInfo("Europe/Paris")
LORD_HOWE = ZoneInfo("Australia/Lord_Howe")


def local(ticks: list[datetime], zone: ZoneInfo) -> list[str]:
    return [tick.astimezone(zone).isoformat() for tick in ticks]


def walk(cron: Cron, start: datetime, count: int) -> list[datetime]:
    """Tick after tick with `next_after`, as a ticker that records each in turn meets them."""
    ticks = []
    at = start
    for _ in range(count):
        found = cron.next_after(at)
        assert found is not None
        ticks.append(found)
        at = found
    return ticks


# -- daylight saving -----------------------------------------------------------------------------


def test_a_tick_in_the_hour_spring_forward_skips_runs_once_after_the_gap() -> None:
    # Paris, 29 March 2026: 02:00 jumps to 03:00; 02:30 does not exist that night.
    cron = Cron("30 2 * * *", "Europe/Paris")
    start = datetime(2026, 3, 27, 12, tzinfo=UTC)
    expected = [
        "2026-03-28T02:30:00+01:00",
        "2026-03-29T03:00:00+02:00",  # once, at the first minute after the gap
        "2026-03-30T02:30:00+02:00",
    ]
    assert local(cron.between(start, start + timedelta(days=3), 10), PARIS) == expected
    assert local(walk(cron, start, 3), PARIS) == expected


def test_six_fields_at_a_fixed_time_of_day_tick_once_a_day_across_both_transitions() -> None:
    """docs/schedules.md: a schedule at a fixed time of day runs once a day whatever the clocks
    do. With the seconds field written out ("0 30 2 * * *" is "30 2 * * *") it must too."""
    spring = datetime(2026, 3, 27, 12, tzinfo=UTC)
    cron = Cron("0 30 2 * * *", "Europe/Paris")
    assert local(cron.between(spring, spring + timedelta(days=3), 10), PARIS) == [
        "2026-03-28T02:30:00+01:00",
        "2026-03-29T03:00:00+02:00",  # not lost in the gap
        "2026-03-30T02:30:00+02:00",
    ]
    fall = datetime(2026, 10, 23, 12, tzinfo=UTC)
    assert local(cron.between(fall, fall + timedelta(days=3), 10), PARIS) == [
        "2026-10-24T02:30:00+02:00",
        "2026-10-25T02:30:00+02:00",  # not twice
        "2026-10-26T02:30:00+01:00",
    ]


def test_a_tick_in_the_hour_fall_back_repeats_runs_once() -> None:
    # Paris, 25 October 2026: 03:00 goes back to 02:00; 02:30 happens twice that night.
    cron = Cron("30 2 * * *", "Europe/Paris")
    start = datetime(2026, 10, 23, 12, tzinfo=UTC)
    expected = [
        "2026-10-24T02:30:00+02:00",
        "2026-10-25T02:30:00+02:00",  # the first 02:30 only
        "2026-10-26T02:30:00+01:00",
    ]
    assert local(cron.between(start, start + timedelta(days=3), 10), PARIS) == expected
    assert local(walk(cron, start, 3), PARIS) == expected
    # A worker that starts during the repeated hour, after the tick, does not tick it again.
    second_pass = datetime(2026, 10, 25, 2, 10, tzinfo=PARIS).replace(fold=1)
    assert local([cron.next_after(second_pass)], PARIS) == ["2026-10-26T02:30:00+01:00"]  # type: ignore[list-item]


def test_the_latest_tick_of_a_repeated_hour_is_found_from_its_second_pass() -> None:
    cron = Cron("30 2 * * *", "Europe/Paris")
    second_pass = datetime(2026, 10, 25, 2, 10, tzinfo=PARIS).replace(fold=1)
    latest = cron.latest_until(second_pass)
    assert latest is not None
    assert local([latest], PARIS) == ["2026-10-25T02:30:00+02:00"]


def test_a_zone_with_a_30_minute_shift() -> None:
    # Lord Howe Island: 02:00 jumps to 02:30 on 4 October 2026, and 02:00 goes back to 01:30
    # on 5 April 2026.
    spring = Cron("15 2 * * *", "Australia/Lord_Howe")
    start = datetime(2026, 10, 2, tzinfo=UTC)
    assert local(spring.between(start, start + timedelta(days=3), 10), LORD_HOWE) == [
        "2026-10-03T02:15:00+10:30",
        "2026-10-04T02:30:00+11:00",  # 02:15 does not exist: once, after the gap
        "2026-10-05T02:15:00+11:00",
    ]
    autumn = Cron("45 1 * * *", "Australia/Lord_Howe")
    start = datetime(2026, 4, 3, 12, tzinfo=UTC)
    expected = [
        "2026-04-04T01:45:00+11:00",
        "2026-04-05T01:45:00+11:00",  # 01:45 happens twice that night: once
        "2026-04-06T01:45:00+10:30",
    ]
    assert local(autumn.between(start, start + timedelta(days=3), 10), LORD_HOWE) == expected
    assert local(walk(autumn, start, 3), LORD_HOWE) == expected


def test_an_hourly_schedule_ticks_every_real_hour_across_transitions() -> None:
    # Not a fixed time of day: every hour that happens, twice the repeated one, never the
    # skipped one (as Debian's cron runs jobs with a star in the hour field).
    cron = Cron("0 * * * *", "Europe/Paris")
    spring = datetime(2026, 3, 28, 23, tzinfo=UTC)
    assert len(cron.between(spring, spring + timedelta(hours=4), 10)) == 4
    autumn = datetime(2026, 10, 24, 22, tzinfo=UTC)
    ticks = cron.between(autumn, autumn + timedelta(hours=4), 10)
    assert [t.astimezone(PARIS).hour for t in ticks] == [1, 2, 2, 3]


@pytest.mark.timeout(10)
def test_a_zone_whose_clock_changes_off_the_hour_is_walked_without_end() -> None:
    # Pacific/Chatham goes back from 03:45 (+13:45) to 02:45 (+12:45) on 5 April 2026. Walked
    # on the zone's clock by cronsim, an expression with a star in its hour or minute never
    # came back from the instants around that change, and the worker's event loop with it.
    chatham = ZoneInfo("Pacific/Chatham")
    every_minute_of_3 = Cron("* 3 * * *", "Pacific/Chatham")
    night = datetime(2026, 4, 4, 12, tzinfo=UTC)
    ticks = every_minute_of_3.between(night, night + timedelta(hours=6), 1000)
    # 03:00 to 03:44 before the change, then the whole of 03:xx again after it.
    assert len(ticks) == 45 + 60
    assert local(ticks[44:46], chatham) == [
        "2026-04-05T03:44:00+13:45",
        "2026-04-05T03:00:00+12:45",
    ]
    after_the_change = datetime(2026, 4, 4, 14, 0, 30, tzinfo=UTC)
    assert every_minute_of_3.next_after(after_the_change) == datetime(
        2026, 4, 4, 14, 15, tzinfo=UTC
    )
    every_three_hours = Cron("45 */3 * * *", "Pacific/Chatham")
    assert every_three_hours.next_after(after_the_change) == datetime(
        2026, 4, 4, 15, tzinfo=UTC
    )  # 03:45 +12:45
    assert every_three_hours.latest_until(after_the_change) == datetime(
        2026, 4, 4, 11, tzinfo=UTC
    )  # 00:45 +13:45
    seconds = Cron("0 45 */3 * * *", "Pacific/Chatham")
    assert seconds.next_after(after_the_change) == datetime(2026, 4, 4, 15, tzinfo=UTC)


def test_a_repeated_half_hour_ticks_twice_on_the_real_clock() -> None:
    # Lord Howe goes back from 02:00 (+11:00) to 01:30 (+10:30) on 5 April 2026: a schedule at
    # half past every hour ticks at both 01:30s, as an hourly one does in Paris.
    cron = Cron("30 * * * *", "Australia/Lord_Howe")
    night = datetime(2026, 4, 4, 13, tzinfo=UTC)
    assert local(cron.between(night, night + timedelta(hours=3), 10), LORD_HOWE) == [
        "2026-04-05T00:30:00+11:00",
        "2026-04-05T01:30:00+11:00",
        "2026-04-05T01:30:00+10:30",
        "2026-04-05T02:30:00+10:30",
    ]


def test_six_fields_tick_by_the_second() -> None:
    cron = Cron("*/2 * * * * *", "UTC")
    start = datetime(2026, 1, 1, tzinfo=UTC)
    assert cron.between(start, start + timedelta(seconds=7), 10) == [
        start + timedelta(seconds=s) for s in (2, 4, 6)
    ]
    assert cron.latest_until(start + timedelta(seconds=5, microseconds=3)) == start + timedelta(
        seconds=4
    )
    assert cron.latest_until(start + timedelta(seconds=4)) == start + timedelta(seconds=4)
    assert cron.next_after(start + timedelta(seconds=4)) == start + timedelta(seconds=6)


def test_between_stops_at_its_limit() -> None:
    cron = Cron("* * * * * *", "UTC")
    start = datetime(2026, 1, 1, tzinfo=UTC)
    assert len(cron.between(start, start + timedelta(hours=1), 5)) == 5


@pytest.mark.parametrize(
    ("expression", "timezone", "message"),
    [
        ("every day", "UTC", "bad cron expression 'every day'"),
        ("61 * * * *", "UTC", "bad cron expression '61 * * * *'"),
        ("* * * *", "UTC", "Wrong number of fields"),
        ("0 0 31 4 *", "UTC", "Bad day-of-month"),  # there is no 31 April
        ("0 9 * * *", "Mars/Olympus_Mons", "unknown time zone 'Mars/Olympus_Mons'"),
        ("0 9 * * *", "", "unknown time zone ''"),
        ("0 9 * * *", "../../etc/passwd", "unknown time zone"),
    ],
)
def test_a_bad_expression_or_zone_is_refused(expression: str, timezone: str, message: str) -> None:
    with pytest.raises(ScheduleDefinitionError, match=message.replace("*", r"\*")):
        Cron(expression, timezone)


# -- catch-up ------------------------------------------------------------------------------------

EVERY_MINUTE = Cron("* * * * *", "UTC")
NOW = datetime(2026, 5, 1, 12, 0, 30, tzinfo=UTC)
STOPPED = datetime(2026, 5, 1, 11, 50, 30, tzinfo=UTC)  # the last tick recorded: 11:50
STARTED = datetime(2026, 5, 1, 11, 58, 30, tzinfo=UTC)  # the worker started then


def minute(hour: int, minute: int) -> datetime:
    return datetime(2026, 5, 1, hour, minute, tzinfo=UTC)


def test_on_time_ticks_are_all_enqueued() -> None:
    planned = plan_ticks(EVERY_MINUTE, "none", minute(11, 58), minute(11, 58), NOW)
    assert planned == [PlannedTick(minute(11, 59)), PlannedTick(minute(12, 0))]


def test_catch_up_none_records_the_latest_missed_tick_as_skipped() -> None:
    planned = plan_ticks(EVERY_MINUTE, "none", minute(11, 50), STARTED, NOW)
    assert planned == [
        PlannedTick(minute(11, 58), skipped="missed while no worker ran (catch_up='none')"),
        PlannedTick(minute(11, 59)),
        PlannedTick(minute(12, 0)),
    ]


def test_catch_up_latest_enqueues_the_latest_missed_tick() -> None:
    planned = plan_ticks(EVERY_MINUTE, "latest", minute(11, 50), STARTED, NOW)
    assert [(p.at, p.skipped) for p in planned] == [
        (minute(11, 58), None),
        (minute(11, 59), None),
        (minute(12, 0), None),
    ]
    assert planned[0].note == "caught up: the latest of the ticks missed while no worker ran"


def test_catch_up_window_enqueues_every_missed_tick_within_it() -> None:
    planned = plan_ticks(EVERY_MINUTE, timedelta(minutes=5), minute(11, 50), STARTED, NOW)
    assert [p.at for p in planned] == [minute(11, m) for m in range(56, 60)] + [minute(12, 0)]
    assert all(p.skipped is None for p in planned)
    assert planned[0].note == "caught up: missed while no worker ran"
    assert planned[-1].note is None


def test_nothing_missed_nothing_caught_up() -> None:
    for policy in ("none", "latest", timedelta(hours=1)):
        assert plan_ticks(EVERY_MINUTE, policy, minute(12, 0), STARTED, NOW) == []


def test_a_long_stop_costs_a_bounded_round() -> None:
    every_second = Cron("* * * * * *", "UTC")
    month_ago = NOW - timedelta(days=30)
    planned = plan_ticks(every_second, "latest", month_ago, NOW - timedelta(seconds=2), NOW)
    assert [p.at for p in planned] == [
        NOW.replace(microsecond=0) - timedelta(seconds=s) for s in (2, 1, 0)
    ]
    window = plan_ticks(every_second, timedelta(days=1), month_ago, NOW, NOW)
    assert len(window) == MAX_TICKS_PER_ROUND


# -- a property over zones, expressions and instants ---------------------------------------------

ZONES = [
    *("Europe/Paris", "America/New_York", "Australia/Lord_Howe", "Asia/Kolkata", "UTC"),
    "Pacific/Chatham",
]
EXPRESSIONS = [
    *("30 2 * * *", "0 1 * * *", "45 1 * * SUN", "*/20 * * * *", "0 */3 * * *"),
    *("45 */3 * * *", "*/5 3 * * *"),
]


@settings(max_examples=150, deadline=None)
@given(
    zone=st.sampled_from(ZONES),
    expression=st.sampled_from(EXPRESSIONS),
    start=st.one_of(
        st.datetimes(
            min_value=datetime(2025, 1, 1), max_value=datetime(2027, 12, 31), timezones=st.just(UTC)
        ),
        # Near the transitions of these zones in 2026, where walking a wall clock goes wrong.
        st.builds(
            lambda day, minutes: day + timedelta(minutes=minutes),
            st.sampled_from(
                [datetime(2026, m, d, tzinfo=UTC) for m, d in ((3, 7), (3, 28), (4, 4), (10, 3))]
                + [datetime(2026, m, d, tzinfo=UTC) for m, d in ((10, 24), (10, 31))]
            ),
            st.integers(0, 3 * 24 * 60),
        ),
    ),
)
def test_ticks_are_the_same_however_they_are_walked(
    zone: str, expression: str, start: datetime
) -> None:
    # One tick after another (a ticker running), all at once (a catch-up window), or the latest
    # before an instant (catch-up "latest"): the same instants, each once, in order.
    cron = Cron(expression, zone)
    until = start + timedelta(days=3)
    listed = cron.between(start, until, 1000)
    assert listed == sorted(set(listed))
    assert all(start < tick <= until for tick in listed)
    walked = [tick for tick in walk(cron, start, len(listed) + 1) if tick <= until]
    assert walked == listed
    if listed:
        assert cron.latest_until(until) == listed[-1]
        assert cron.latest_until(listed[0]) == listed[0]
