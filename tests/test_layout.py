"""tests/ mirrors the package: every module `starlette_jobs/_x.py` has its unit tests in
`tests/test_x.py`, and every `tests/test_*.py` at the top level is one module's tests or is
named below with what it tests instead. tests/README.md describes the layout."""

from __future__ import annotations

import ast
import pkgutil
from pathlib import Path

import starlette_jobs

TESTS = Path(__file__).resolve().parent

# Modules whose tests are not in tests/test_<name>.py, and where they are instead.
TESTED_ELSEWHERE = {
    "__init__": "test_public_api.py",  # re-exports only: the exported names are pinned there
    "__main__": "cli/test_main.py",  # two lines that hand over to `cli._main.main`
    # Its warnings, with the ticker's rounds that give them; the declarations, with the rounds
    # that write them (declared late, removed by newer code, written again over old code's).
    "worker._schedule_warnings": "worker/test_ticker.py",
    "worker._schedule_declarations": "worker/test_ticker.py",
    # The status routes' endpoints and types, tested through the routes that serve them.
    "web._endpoints": "web/test_status_routes.py",
    "web._types": "web/test_status_routes.py",
    # Parts of the worker that its own tests drive: stopping an attempt, a queue's poll,
    # starting the claimed jobs.
    "worker._cancels": "worker/test_worker.py",
    "worker._queues": "worker/test_worker.py",
    "worker._duties": "worker/test_worker.py",
    "worker._launch": "worker/test_worker.py",
    # The memory store's answers to operators and users, held by the contract suite.
    "memory._queries": "contract/test_store_contract.py",
    # The memory store's tables, tested through the store built on them (and the contract suite).
    "memory._tables": "memory/test_store.py",
    # Periodic jobs: the records and the stores' parts, held by the contract suite; the
    # schedules' queries, through `Jobs` on both stores.
    "_schedule_records": "contract/test_schedules_contract.py",
    "memory._schedules": "contract/test_schedules_contract.py",
    "postgres._schedules": "contract/test_schedules_contract.py",
    "_schedule_queries": "integration/test_schedules.py",
    # The memory store's queue controls: all they do is what the contract suite holds both
    # stores to.
    "memory._controls": "contract/test_controls_contract.py",
    # Counts per status (jobs.status_counts): both stores' parts held by the contract suite; the
    # record's own behaviour in tests/test_count_records.py.
    "memory._counts": "contract/test_counts_contract.py",
    "postgres._counts": "contract/test_counts_contract.py",
    # The worker registry: the records and the stores' parts, held by the contract suite; the
    # listing, through `Jobs` and real worker processes.
    "_worker_records": "contract/test_workers_contract.py",
    "memory._registry": "contract/test_workers_contract.py",
    "_worker_queries": "processes/test_registry.py",
    # The Store protocol's parts: protocols, held by the contract suite that runs both stores.
    "store._listener": "contract/test_store_contract.py",
    "store._parts": "contract/test_store_contract.py",
    # Giving running jobs back on PostgreSQL, held by the contract suite (and the workflows'
    # for a step given back cancelled).
    "postgres._releases": "contract/test_store_contract.py",
    "postgres._brief": "contract/test_store_contract.py",
    # Bulk actions: the stores' parts and the protocol, held by the contract suite.
    "store._bulk": "contract/test_bulk_contract.py",
    "memory._bulk": "contract/test_bulk_contract.py",
    # `jobs.drain`, through `Jobs` running jobs end to end.
    "_draining": "integration/test_enqueue_and_run.py",
    # Workflows: `jobs.workflow`, through `Jobs` on both stores; the graph's order and checks,
    # through the `Workflow` builder.
    "_workflow_queries": "contract/test_workflows_contract.py",
    "_workflow_graph": "test_workflows.py",
    # Steps a running step adds: the memory store's part, held by the contract suite.
    "memory._added_steps": "contract/test_added_steps_contract.py",
    # The queues' gauges: the record and the stores' reads, held by the contract suite.
    "_metric_records": "contract/test_metrics_contract.py",
    "memory._depths": "contract/test_metrics_contract.py",
    "postgres._depths": "contract/test_metrics_contract.py",
    # Throughput per queue and minute (jobs.throughput): the record, the query, the protocol
    # and both stores' parts, held by the contract suite; the worker's counter in
    # worker/test_throughput.py.
    "_throughput_records": "contract/test_throughput_contract.py",
    "_throughput_queries": "contract/test_throughput_contract.py",
    "store._throughput": "contract/test_throughput_contract.py",
    "memory._throughput": "contract/test_throughput_contract.py",
    "postgres._throughput": "contract/test_throughput_contract.py",
    # The testing kit, tested as a user meets it: its fixtures and helpers in one file.
    "testing._fixtures": "testing/test_testing.py",
    "testing._helpers": "testing/test_testing.py",
}

# Top-level test files that are not one module's: what each tests.
CROSS_CUTTING = {
    "test_docs.py": "every code block of docs/ runs, and every public name is named by a page",
    "test_example_app.py": "example_app/, used the way users would",
    "test_example_fastapi.py": "example_fastapi/ and docs/fastapi.md's app, served by uvicorn",
    "test_faultproxy.py": "tests/faultproxy.py, the network faults the tests inject",
    "test_layout.py": "this mirror",
    "test_public_api.py": "starlette_jobs/__init__.py: the exported names",
    "dashboard/test_browser.py": "the dashboard's pages in headless Chromium (Playwright)",
    "dashboard/test_hostile_input.py": "the dashboard fed garbage, read-only, behind a proxy",
}


def modules() -> list[str]:
    """Every module of the package, as a dotted path inside it: `_worker`, `testing`, ..."""
    found = [
        info.name.removeprefix("starlette_jobs.")
        for info in pkgutil.walk_packages(starlette_jobs.__path__, "starlette_jobs.")
        if not info.ispkg
    ]
    return ["__init__", *sorted(found)]


def unit_tests_of(module: str) -> Path:
    """tests/test_jobs.py for `_jobs`; tests/memory/test_store.py for `memory._store`."""
    *folders, name = module.split(".")
    if module in TESTED_ELSEWHERE:
        return TESTS / TESTED_ELSEWHERE[module]
    return TESTS.joinpath(*folders, f"test_{name.removeprefix('_')}.py")


def test_the_package_is_found_whole() -> None:
    found = modules()
    assert {"__init__", "__main__", "worker._worker", "store._protocol", "_jobs"} <= set(found)


def test_every_module_has_its_unit_tests() -> None:
    missing = [
        f"{module} -> {unit_tests_of(module).relative_to(TESTS.parent)}"
        for module in modules()
        if not unit_tests_of(module).is_file()
    ]
    assert missing == [], "modules without their tests/test_<name>.py"


def test_every_test_file_of_the_mirror_is_a_modules_or_says_what_it_tests() -> None:
    """At the top and in the folders that mirror the package's (tests/worker/, ...); not in
    integration/, contract/ and processes/, which test no single module."""
    mirrored = {unit_tests_of(module).relative_to(TESTS).as_posix() for module in modules()}
    folders = {Path(*module.split(".")[:-1]) for module in modules()}
    orphans = sorted(
        name
        for folder in folders
        for path in (TESTS / folder).glob("test_*.py")
        if (name := path.relative_to(TESTS).as_posix()) not in mirrored
        and name not in CROSS_CUTTING
    )
    assert orphans == [], "test files of no module: rename them, or add them to CROSS_CUTTING"


def test_the_exceptions_name_what_exists() -> None:
    assert set(TESTED_ELSEWHERE) <= set(modules())
    for name in [*TESTED_ELSEWHERE.values(), *CROSS_CUTTING]:
        assert (TESTS / name).is_file(), name


PACKAGE = Path(starlette_jobs.__file__).resolve().parent


def _driver_names() -> set[str]:
    """`asyncpg`, and the names of the errors it raises (`UniqueViolationError`, ...)."""
    import asyncpg.exceptions

    return {"asyncpg"} | {
        name
        for name, value in vars(asyncpg.exceptions).items()
        if isinstance(value, type) and issubclass(value, BaseException)
    }


def _type_checking_only(tree: ast.Module) -> set[ast.AST]:
    """The nodes under `if TYPE_CHECKING:`, which never run."""
    return {
        node
        for statement in ast.walk(tree)
        if isinstance(statement, ast.If) and ast.unparse(statement.test) == "TYPE_CHECKING"
        for inner in statement.body
        for node in ast.walk(inner)
    }


def test_the_driver_is_named_only_under_postgres() -> None:
    """asyncpg and its errors stop at the PostgreSQL store: no module outside postgres/ imports
    the driver or names one of its errors (in code: docstrings and comments may speak of it),
    so that the rest of the library meets an outage as the store's `DatabaseUnavailableError`,
    the same from either store."""
    driver = _driver_names()
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        relative = path.relative_to(PACKAGE)
        if relative.parts[0] == "postgres":
            continue
        tree = ast.parse(path.read_text("utf-8"))
        skipped = _type_checking_only(tree)
        for node in ast.walk(tree):
            if node in skipped:
                continue
            if isinstance(node, ast.Import | ast.ImportFrom):
                modules = [alias.name for alias in node.names]
                if isinstance(node, ast.ImportFrom):
                    modules = [node.module or "", *(alias.name for alias in node.names)]
                named = {part for module in modules for part in module.split(".")}
            elif isinstance(node, ast.Name):
                named = {node.id}
            elif isinstance(node, ast.Attribute):
                named = {node.attr}
            else:
                continue
            if named & driver:
                found.append(f"{relative}:{node.lineno}: {sorted(named & driver)}")
    assert found == []


def test_the_driver_check_sees_what_it_looks_for() -> None:
    """The check above would find the driver where it is: under postgres/."""
    names = _driver_names()
    assert {"asyncpg", "UniqueViolationError", "QueryCanceledError"} <= names
    text = (PACKAGE / "postgres" / "_connections.py").read_text("utf-8")
    assert "import asyncpg" in text
