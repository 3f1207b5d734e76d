"""`cli/_target.py`: the target found in its module, and the command's options applied to the
`Jobs` it names; a mistake is one line."""

from __future__ import annotations

import importlib
import sys

import pytest

from starlette_jobs import JobDefinitionError, Queue
from starlette_jobs.cli._parser import build_parser
from starlette_jobs.cli._target import CommandError, jobs_for, load_jobs, parse_queues
from tests.cli.conftest import APP, Module


@pytest.mark.parametrize(
    ("specs", "queues"),
    [
        (["emails=5"], {"emails": 5}),
        (["emails"], {"emails": 10}),
        (["emails=", "reports=1"], {"emails": 10, "reports": 1}),
        (["a=1", "a=2"], {"a": 2}),
    ],
)
def test_queue_options_are_names_with_a_concurrency_of_10_unless_given(
    specs: list[str], queues: dict[str, int]
) -> None:
    assert parse_queues(specs) == queues


@pytest.mark.parametrize("spec", ["emails=five", "emails=1.5", "=x"])
def test_a_queue_option_that_is_not_name_equals_number_is_refused_quoting_it(spec: str) -> None:
    with pytest.raises(CommandError, match=f"--queue {spec!r}: expected NAME=CONCURRENCY"):
        parse_queues([spec])


def test_a_workers_options_override_the_jobs_own_settings(module: Module) -> None:
    name = module("cli_unit_app", APP)
    args = build_parser().parse_args(
        ["worker", f"{name}:jobs", "--queue", "reports=2", "--batch-size", "5",
         "--poll-interval", "0.5", "--lease-duration", "60", "--shutdown-grace", "0",
         "--dsn", "postgresql://other@db2/app"]
    )  # fmt: skip
    config = jobs_for(args).config
    assert dict(config.queues) == {"reports": 2}
    assert (config.batch_size, config.poll_interval) == (5, 0.5)
    assert (config.lease_duration, config.shutdown_grace) == (60.0, 0.0)
    assert config.dsn == "postgresql://other@db2/app"


@pytest.mark.parametrize(("options", "events"), [([], True), (["--no-events"], False)])
def test_a_worker_records_events_unless_told_not_to(
    module: Module, options: list[str], events: bool
) -> None:
    name = module("cli_unit_app", APP)
    config = jobs_for(build_parser().parse_args(["worker", f"{name}:jobs", *options])).config
    assert config.events is events


def test_no_events_in_the_jobs_is_kept_unless_a_worker_says_events(module: Module) -> None:
    name = module("cli_unit_quiet", APP.replace("batch_size=50", "events=False"))
    assert jobs_for(build_parser().parse_args(["worker", name])).config.events is False
    assert jobs_for(build_parser().parse_args(["worker", name, "--events"])).config.events is True


@pytest.mark.parametrize("source", [APP, APP.replace("batch_size=50", "protect_event_loop=True")])
def test_a_worker_process_protects_its_event_loop_only_when_told_to(
    module: Module, source: str
) -> None:
    name = module("cli_unit_protect", source)
    # Whatever the Jobs says: that was for the web app, and a worker process serves no requests.
    assert jobs_for(build_parser().parse_args(["worker", name])).config.protect_event_loop is False
    told = build_parser().parse_args(["worker", name, "--protect-event-loop"])
    assert jobs_for(told).config.protect_event_loop is True


def test_without_options_a_worker_keeps_the_jobs_own_settings(module: Module) -> None:
    name = module("cli_unit_app", APP)
    jobs = jobs_for(build_parser().parse_args(["worker", f"{name}:app"]))
    assert jobs is not sys.modules[name].jobs  # a copy: the module's own is left as it was
    assert dict(jobs.config.queues) == {"emails": 3}
    assert (jobs.config.batch_size, jobs.config.dsn) == (50, "postgresql://app@db/app")


@pytest.mark.parametrize("command", ["migrate", "status"])
def test_one_off_commands_run_no_worker_and_need_the_database_now(
    module: Module, command: str
) -> None:
    name = module("cli_unit_app", APP)
    config = jobs_for(build_parser().parse_args([command, name])).config
    assert dict(config.queues) == {}
    assert (config.migrate, config.require_database) == (False, True)
    assert jobs_for(build_parser().parse_args([command])).config.dsn is None  # no target: defaults


def test_a_worker_for_jobs_without_queues_must_be_told_which(module: Module) -> None:
    name = module("cli_unit_web", "from starlette_jobs import Jobs\njobs = Jobs(queues={})\n")
    with pytest.raises(CommandError, match=r"declares no queues \(queues=\{\}\); name them"):
        jobs_for(build_parser().parse_args(["worker", f"{name}:jobs"]))
    jobs = jobs_for(build_parser().parse_args(["worker", f"{name}:jobs", "--queue", "q"]))
    assert dict(jobs.config.queues) == {"q": 10}


def test_an_option_out_of_range_is_the_settings_own_error(module: Module) -> None:
    name = module("cli_unit_app", APP)
    with pytest.raises(JobDefinitionError, match="batch_size must be at least 1"):
        jobs_for(build_parser().parse_args(["worker", name, "--batch-size", "0"]))


def test_the_target_may_name_the_jobs_the_app_beside_it_or_the_module(module: Module) -> None:
    name = module("cli_unit_app", APP)
    found = load_jobs(f"{name}:jobs")
    assert found is importlib.import_module(name).jobs
    assert load_jobs(f"{name}:app") is found
    assert load_jobs(name) is found


@pytest.mark.parametrize(
    ("source", "target", "message"),
    [
        ("x = 1\n", ":x", "expected a Jobs instance, or a module holding exactly one (found 0)"),
        (
            "from starlette_jobs import Jobs\na = Jobs()\nb = Jobs()\n",
            "",
            "expected a Jobs instance, or a module holding exactly one (found 2)",
        ),
        ("x = 1\n", ":missing", "has no attribute 'missing'"),
        ("import no_such_module_of_ours\n", "", "No module named 'no_such_module_of_ours'"),
    ],
)
def test_a_target_that_names_no_single_jobs_says_so(
    module: Module, source: str, target: str, message: str
) -> None:
    name = module("cli_unit_target", source)
    with pytest.raises(CommandError) as refused:
        load_jobs(name + target)
    assert message in str(refused.value)
    assert str(refused.value).count("\n") == 0


def test_a_queue_option_keeps_the_limits_the_jobs_declares_for_that_queue() -> None:
    declared = {"exports": Queue(concurrency=10, global_limit=4), "plain": Queue(concurrency=3)}
    assert parse_queues(["exports=2", "plain=5", "new"], declared) == {
        "exports": Queue(concurrency=2, global_limit=4),
        "plain": 5,
        "new": 10,
    }
    with pytest.raises(CommandError, match="--queue 'exports=0': concurrency must be"):
        parse_queues(["exports=0"], declared)


@pytest.mark.parametrize("command", ["worker", "migrate", "status"])
def test_a_schema_option_overrides_the_jobs_own_schema(module: Module, command: str) -> None:
    name = module("cli_unit_schema", APP.replace("batch_size=50", 'schema="billing"'))
    assert jobs_for(build_parser().parse_args([command, name])).config.schema == "billing"
    overridden = jobs_for(build_parser().parse_args([command, name, "--schema", "mail"]))
    assert overridden.config.schema == "mail"
    default = jobs_for(build_parser().parse_args([command, module("cli_unit_plain", APP)]))
    assert default.config.schema is None


def test_an_empty_schema_option_is_refused_not_taken_for_none(module: Module) -> None:
    """`--schema "$APP_SCHEMA"` with the variable unset: the command ran on the default
    schema's jobs (another app's, say), with no error. `Jobs(schema="")` is refused, and so is
    the option now."""
    name = module("cli_unit_empty_schema", APP)
    with pytest.raises(JobDefinitionError, match="invalid schema name ''"):
        jobs_for(build_parser().parse_args(["status", name, "--schema", ""]))
