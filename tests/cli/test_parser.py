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
