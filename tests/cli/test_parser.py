"""`cli/_parser.py`: the options each command takes; a usage mistake is argparse's exit status 2.
That every option says what it does and its default is in integration/test_cli.py."""

from __future__ import annotations

import math

import pytest

from starlette_jobs.cli._parser import build_parser


@pytest.mark.parametrize(
    "argv",
    [
        [],
        ["worker"],
        ["frobnicate"],
        ["--log-level", "loud", "status"],
        ["worker", "app:jobs", "--burst", "--retry-wait", "nan"],
        ["worker", "app:jobs", "--burst", "--retry-wait", "-1"],
        # Digits Python's int() reads, which no operator means as a job id or a count.
        ["list", "--before", "\u0661\u0662"],
        ["list", "--limit", "1_0"],
        ["peek", "emails", "--limit", "\uff15"],
    ],
)
def test_usage_mistakes_are_argparses_exit_status_2(
    argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        build_parser().parse_args(argv)
    assert exited.value.code == 2
    assert "usage: starlette-jobs" in capsys.readouterr().err


@pytest.mark.parametrize(("given", "seconds"), [("0", 0.0), ("2.5", 2.5), ("inf", math.inf)])
def test_retry_wait_takes_seconds_from_zero_to_forever(given: str, seconds: float) -> None:
    args = build_parser().parse_args(["worker", "app:jobs", "--burst", "--retry-wait", given])
    assert args.retry_wait == seconds


def test_only_a_worker_must_name_its_target() -> None:
    for command in ("migrate", "status", "schedules", "workers"):
        assert build_parser().parse_args([command]).target is None
    assert build_parser().parse_args(["pause", "emails"]).queue == "emails"
    with pytest.raises(SystemExit):
        build_parser().parse_args(["pause"])  # which queue


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["show", "abc"], "argument JOB_ID: a job id is a whole number from 1 to"),
        (["events", "-5"], "argument JOB_ID: a job id is a whole number from 1 to"),
        (["show", "9" * 40], "argument JOB_ID: a job id is a whole number from 1 to"),
        (["show", "\u0663"], "argument JOB_ID: a job id is a whole number from 1 to"),
        (["retry", "1", "x"], "argument JOB_ID: a job id is a whole number from 1 to"),
        (["cancel", ""], "argument JOB_ID: a job id is a whole number from 1 to"),
        (["peek", "a/b"], "argument QUEUE: invalid queue name 'a/b'"),
        (["peek", "x" * 49], "argument QUEUE: invalid queue name"),
        (["list", "--queue", "emails/"], "argument --queue: invalid queue name 'emails/'"),
        (["status", "--queue", "a b"], "argument --queue: invalid queue name 'a b'"),
    ],
)
def test_what_no_job_id_or_queue_can_be_is_a_usage_mistake(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """A typo is told apart from a job or a queue that exists no more: exit status 2 with
    what was wrong, not 3 ("no such job") or 0 ("no jobs match")."""
    with pytest.raises(SystemExit) as exited:
        build_parser().parse_args(argv)
    assert exited.value.code == 2
    assert message in capsys.readouterr().err


def test_job_ids_and_queues_are_kept_as_given() -> None:
    assert build_parser().parse_args(["show", "42"]).job_id == "42"
    assert build_parser().parse_args(["retry", "1", "9223372036854775807"]).job_ids == [
        "1",
        "9223372036854775807",
    ]
    assert build_parser().parse_args(["peek", "mail.v2-x_1"]).queue == "mail.v2-x_1"
