"""tests/ mirrors the package: every module `starlette_jobs/_x.py` has its unit tests in
`tests/test_x.py`, and every `tests/test_*.py` at the top level is one module's tests or is
named below with what it tests instead. tests/README.md describes the layout. And the driver
(asyncpg) is named by the PostgreSQL store's modules alone."""

from __future__ import annotations

import ast
import pkgutil
from collections.abc import Iterator
from pathlib import Path

import asyncpg

import starlette_jobs

TESTS = Path(__file__).resolve().parent

# Modules whose tests are not in tests/test_<name>.py, and where they are instead.
TESTED_ELSEWHERE = {
    "__init__": "test_public_api.py",  # re-exports only: the exported names are pinned there
    "__main__": "test_cli.py",  # two lines that hand over to `_cli.main`
}

# Top-level test files that are not one module's: what each tests.
CROSS_CUTTING = {
    "test_docs.py": "every code block of docs/ runs, and every public name is named by a page",
    "test_example_app.py": "example_app/, used the way users would",
    "test_example_fastapi.py": "example_fastapi/ and docs/fastapi.md's app, served by uvicorn",
    "test_faultproxy.py": "tests/faultproxy.py, the network faults the tests inject",
    "test_layout.py": "this mirror",
    "test_public_api.py": "starlette_jobs/__init__.py: the exported names",
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
    """tests/test_worker.py for `_worker`; tests/stores/test_memory.py for `stores._memory`."""
    *folders, name = module.split(".")
    if module in TESTED_ELSEWHERE:
        return TESTS / TESTED_ELSEWHERE[module]
    return TESTS.joinpath(*folders, f"test_{name.removeprefix('_')}.py")


def test_the_package_is_found_whole() -> None:
    found = modules()
    assert {"__init__", "__main__", "_worker", "_store", "testing"} <= set(found)


def test_every_module_has_its_unit_tests() -> None:
    missing = [
        f"{module} -> {unit_tests_of(module).relative_to(TESTS.parent)}"
        for module in modules()
        if not unit_tests_of(module).is_file()
    ]
    assert missing == [], "modules without their tests/test_<name>.py"


def test_every_top_level_test_file_is_a_modules_or_says_what_it_tests() -> None:
    mirrored = {unit_tests_of(module).name for module in modules()}
    orphans = sorted(
        path.name
        for path in TESTS.glob("test_*.py")
        if path.name not in mirrored and path.name not in CROSS_CUTTING
    )
    assert orphans == [], "test files of no module: rename them, or add them to CROSS_CUTTING"


def test_the_exceptions_name_what_exists() -> None:
    assert set(TESTED_ELSEWHERE) <= set(modules())
    for name in [*TESTED_ELSEWHERE.values(), *CROSS_CUTTING]:
        assert (TESTS / name).is_file(), name


# -- the driver stays behind the PostgreSQL store ------------------------------------------------

PACKAGE = Path(starlette_jobs.__file__).resolve().parent
# The PostgreSQL store's modules: the only ones that may name the driver or its errors.
# (_startup: its check of the settings at start reads the driver's errors on connecting.)
POSTGRES_MODULES = {
    "_connections.py",
    "_embedded.py",
    "_lanes.py",
    "_migrations.py",
    "_postgres.py",
    "_startup.py",
    "_transactions.py",
}
# The names of the driver's errors, and the store's own tuples of them.
DRIVER_NAMES = {
    "asyncpg",
    *(
        name
        for name, value in vars(asyncpg.exceptions).items()
        if isinstance(value, type) and issubclass(value, BaseException)
    ),
    *("CONNECTION_LOST", "DATABASE_ERRORS", "REFUSED_CONNECTION", "TOO_SLOW"),
}


def driver_names_in(tree: ast.AST) -> list[str]:
    """Where `tree` imports or names the driver or one of `DRIVER_NAMES`, as `line: name`;
    what is under `if TYPE_CHECKING:` (types only, never run) aside."""
    found = []
    for node in _run_code(tree):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [alias.name.split(".")[0] for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            names = [(node.module or "").split(".")[0], *(a.name for a in node.names)]
        elif isinstance(node, ast.Name):
            names = [node.id]
        elif isinstance(node, ast.Attribute):
            names = [node.attr]
        found += [f"{getattr(node, 'lineno', 0)}: {name}" for name in names if name in DRIVER_NAMES]
    return found


def _run_code(node: ast.AST) -> Iterator[ast.AST]:
    """`node` and the nodes under it, but for the bodies of `if TYPE_CHECKING:`."""
    if isinstance(node, ast.If) and ast.unparse(node.test).endswith("TYPE_CHECKING"):
        for statement in node.orelse:
            yield from _run_code(statement)
        return
    yield node
    for child in ast.iter_child_nodes(node):
        yield from _run_code(child)


def test_only_the_postgresql_store_names_the_driver_or_its_errors() -> None:
    """Driver errors stop at the store: the rest of the library meets the library's own
    (`DatabaseUnavailableError`), so the worker meets an outage the same way in both stores."""
    assert {path.name for path in PACKAGE.glob("*.py")} >= POSTGRES_MODULES
    naming = {
        str(path.relative_to(PACKAGE)): found
        for path in sorted(PACKAGE.rglob("*.py"))
        if path.name not in POSTGRES_MODULES
        and (found := driver_names_in(ast.parse(path.read_text("utf-8"))))
    }
    assert naming == {}


def test_the_driver_check_finds_imports_names_and_error_tuples_but_not_types() -> None:
    source = """
from typing import TYPE_CHECKING
import asyncpg.pool
from ._connections import DATABASE_ERRORS, Connection
if TYPE_CHECKING:
    from asyncpg import Record
try:
    pass
except asyncpg.QueryCanceledError:
    pass
except UniqueViolationError:
    pass
'''asyncpg, in a docstring, is no use of it'''
"""
    assert driver_names_in(ast.parse(source)) == [
        "3: asyncpg",
        "4: DATABASE_ERRORS",
        "9: QueryCanceledError",
        "9: asyncpg",
        "11: UniqueViolationError",
    ]
