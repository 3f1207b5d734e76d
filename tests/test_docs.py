"""Every ```python block of docs/*.md and README.md runs, as written, against a real database;
and every public name of the package (its exports, their members and optional parameters, the
plugin's fixtures) is named by some page.

The blocks of one page run in order in one namespace, so a later block can use what an earlier
one defined. A block preceded by `<!-- not-run: reason -->` is left out; few may be.
"""

from __future__ import annotations

import ast
import dataclasses
import enum
import inspect
import logging
import re
import types
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

import starlette_jobs
import starlette_jobs.dashboard
import starlette_jobs.testing
import starlette_jobs.web
from starlette_jobs import CorrelationIdMiddleware, Jobs, OnSuccessMiddleware, Retry
from starlette_jobs._job import _started

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
PAGES = [*sorted(DOCS.glob("*.md")), ROOT / "README.md"]
EXPECTED_DOCS = {
    "cancelling.md",
    "dashboard.md",
    "events.md",
    "fastapi.md",
    "getting-started.md",
    "jobs-and-retries.md",
    "limits.md",
    "logging.md",
    "metrics.md",
    "performance.md",
    "progress.md",
    "reliability.md",
    "requests.md",
    "scaling.md",
    "schedules.md",
    "testing.md",
    "tracing.md",
    "transactions.md",
    "waiting.md",
    "workers.md",
    "workflows.md",
}

_FENCE = re.compile(r"^(\s*)```(\S*)\s*$")
_NOT_RUN = re.compile(r"^<!--\s*not-run:\s*(\S.*?)\s*-->$")


@dataclass(frozen=True, slots=True)
class Block:
    """One ```python block: where it is, its code, and why it is not run (if it is not)."""

    page: Path
    line: int  # 1-based line of the opening fence
    code: str
    not_run: str | None

    def compiled(self) -> Any:
        # Blank lines in front keep the page's line numbers in tracebacks.
        source = "\n" * self.line + self.code
        name = str(self.page.relative_to(ROOT))
        return compile(source, name, "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)


def python_blocks(page: Path) -> list[Block]:
    lines = page.read_text("utf-8").splitlines()
    blocks = []
    index = 0
    while index < len(lines):
        opening = _FENCE.match(lines[index])
        if opening is None:
            index += 1
            continue
        indent, language = opening.groups()
        end = index + 1
        while end < len(lines) and lines[end].strip() != "```":
            end += 1
        if end == len(lines):
            raise AssertionError(f"{page.name}:{index + 1}: code block is never closed")
        if language == "python":
            # An indented block would need dedenting and is easy to miss: keep them at the margin.
            assert not indent, f"{page.name}:{index + 1}: python block must not be indented"
            marker = _NOT_RUN.match(lines[index - 1].strip()) if index else None
            blocks.append(
                Block(
                    page=page,
                    line=index + 1,
                    code="\n".join(lines[index + 1 : end]) + "\n",
                    not_run=marker.group(1) if marker else None,
                )
            )
        index = end + 1
    return blocks


def namespace_name(page: Path) -> str:
    """A module name of the page's own, so `@job` names do not collide across pages."""
    return "docs_" + re.sub(r"\W", "_", page.stem.lower())


def test_every_docs_page_is_there_and_has_python_blocks() -> None:
    assert {page.name for page in DOCS.glob("*.md")} >= EXPECTED_DOCS
    for page in PAGES:
        assert python_blocks(page), f"{page.name} has no python block"


def test_fewer_than_a_third_of_the_blocks_are_left_out() -> None:
    blocks = [block for page in PAGES for block in python_blocks(page)]
    left_out = [block for block in blocks if block.not_run is not None]
    assert len(left_out) * 3 < len(blocks), [f"{b.page.name}:{b.line}" for b in left_out]


def test_the_extractor_finds_blocks_and_markers(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text(
        "text\n```sh\necho '```python'\n```\n"
        "```python\nx = 1\n```\n"
        "<!-- not-run: needs a server -->\n```python\nserve()\n```\n",
        "utf-8",
    )
    blocks = python_blocks(page)
    assert [(b.line, b.code, b.not_run) for b in blocks] == [
        (5, "x = 1\n", None),
        (9, "serve()\n", "needs a server"),
    ]


# The explicit anyio mark matters: conftest marks coroutine tests only after collection, and
# anyio then rebuilds such items without their parametrization.
@pytest.mark.anyio
@pytest.mark.parametrize("page", PAGES, ids=lambda page: page.name)
async def test_python_blocks_run(
    page: Path, database_dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DATABASE_URL", database_dsn)
    namespace: dict[str, Any] = {"__name__": namespace_name(page)}
    with logging_restored():  # docs/logging.md configures logging, as an app would
        for block in python_blocks(page):
            if block.not_run is not None:
                continue
            result = eval(block.compiled(), namespace)
            if inspect.iscoroutine(result):
                await result
    assert not _started, f"{page.name} leaves a Jobs instance started"


@contextmanager
def logging_restored() -> Iterator[None]:
    """Puts every logger back as it was: a page's `dictConfig` (`propagate: False` for
    `starlette_jobs`) would otherwise hide the library's records from later tests' caplog."""
    manager = logging.Logger.manager
    before = {name: logger for name, logger in manager.loggerDict.items()}
    saved = [
        (logger, logger.level, logger.propagate, list(logger.handlers), logger.disabled)
        for logger in [logging.getLogger(), *before.values()]
        if isinstance(logger, logging.Logger)
    ]
    try:
        yield
    finally:
        for logger, level, propagate, handlers, disabled in saved:
            logger.setLevel(level)
            logger.propagate, logger.handlers, logger.disabled = propagate, handlers, disabled
        for name, added in list(manager.loggerDict.items()):
            if name not in before and isinstance(added, logging.Logger):
                added.setLevel(logging.NOTSET)
                added.propagate, added.handlers, added.disabled = True, [], False


_TEST_REFERENCE = re.compile(r"`((?:[\w/]+\.py)?(?:::\w+)?)`")


def test_every_test_the_reliability_page_names_exists() -> None:
    """Each fault in docs/reliability.md names the test that shows it: a renamed or deleted test
    must not leave the page promising what nothing checks any more."""
    page = (DOCS / "reliability.md").read_text()
    rows = [line for line in page.splitlines() if line.startswith("| ") and "test" in line]
    named = 0
    # A file named by its name alone is the one last named with its folder.
    last_with_folder: dict[str, Path] = {}
    for row in rows:
        current: Path | None = None
        for reference in _TEST_REFERENCE.findall(row.rsplit("|", 2)[-2]):
            path, _, name = reference.partition("::")
            if path:
                if "/" in path:
                    current = ROOT / path
                    last_with_folder[current.name] = current
                else:
                    current = last_with_folder.get(path) or next((ROOT / "tests").rglob(path))
                assert current.is_file(), f"{path}: no such test file ({row[:60]}...)"
            if name:
                assert current is not None, f"::{name} follows no file"
                assert re.search(rf"^(async )?def {name}\(", current.read_text(), re.M), (
                    f"{current.relative_to(ROOT)} has no test {name}"
                )
                named += 1
    assert named >= 30


# -- every public name is explained somewhere --------------------------------------------------

# Classes users build themselves: their constructors' optional parameters are public too.
# (`Job`, `ConfiguredJob`, the records and the errors are built by the library.)
CONSTRUCTED = (Jobs, Retry, CorrelationIdMiddleware, OnSuccessMiddleware)


@dataclass(frozen=True)
class DocsText:
    """All that the pages say, split as the checks below read it."""

    text: str
    sections: list[str]  # from one heading to the next
    keywords: set[tuple[str, str]]  # (called name, keyword) of every call in a python block

    @classmethod
    def read(cls) -> DocsText:
        texts = [page.read_text("utf-8") for page in PAGES]
        keywords: set[tuple[str, str]] = set()
        for page in PAGES:
            for block in python_blocks(page):
                for node in ast.walk(ast.parse(block.code)):
                    if isinstance(node, ast.Call):
                        called = node.func
                        name = getattr(called, "attr", None) or getattr(called, "id", None)
                        keywords |= {(name, k.arg) for k in node.keywords if name and k.arg}
        sections = [part for text in texts for part in re.split(r"^(?=#)", text, flags=re.M)]
        return cls("\n".join(texts), sections, keywords)

    def names(self, name: str) -> bool:
        return re.search(rf"(?<!\w){re.escape(name)}(?!\w)", self.text) is not None

    def names_member(self, member: str) -> bool:
        """`record.member`, or `member` in backticks."""
        return re.search(rf"\.{member}(?!\w)|`{member}`", self.text) is not None

    def names_parameter(self, function: str, parameter: str) -> bool:
        """A call that passes it, `function(..., parameter...)`, or a section that names the
        function and `parameter=` or `parameter` in backticks (a list of the options, say)."""
        if (function, parameter) in self.keywords:
            return True
        inline = rf"(?<!\w){function}\([^)\n]*(?<!\w){parameter}(?!\w)"
        named = rf"(?<!\w){parameter}=|`{parameter}`"
        return any(
            re.search(inline, p)
            or (re.search(rf"(?<!\w){function}(?!\w)", p) and re.search(named, p))
            for p in self.sections
        )


def public_modules() -> list[types.ModuleType]:
    return [starlette_jobs, starlette_jobs.web, starlette_jobs.testing, starlette_jobs.dashboard]


def public_names() -> list[tuple[str, object]]:
    """(`module.name`, value) for what each public module exports, and the plugin's fixtures."""
    found: dict[str, object] = {}
    for module in public_modules():
        exported = list(getattr(module, "__all__", []))
        exported += [n for n, v in vars(module).items() if type(v).__name__.startswith("Fixture")]
        for name in exported:
            found[f"{module.__name__}.{name}"] = getattr(module, name)
    return list(found.items())


def _optional_parameters(function: Any) -> list[str]:
    """The parameters a caller may leave out or must name: the ones to learn about."""
    try:
        parameters = inspect.signature(function).parameters.values()
    except (TypeError, ValueError):
        return []
    return [
        p.name
        for p in parameters
        if not p.name.startswith("_")
        and p.name not in ("self", "cls")
        and (
            p.kind is p.KEYWORD_ONLY
            or (p.kind is p.POSITIONAL_OR_KEYWORD and p.default is not p.empty)
        )
    ]


def undocumented_names(docs: DocsText) -> list[str]:
    """Every public name, member and parameter that no page names, as `where: what`."""
    missing = []
    classes: list[type] = []
    for qualified, value in public_names():
        name = qualified.rsplit(".", 1)[1]
        if not docs.names(name):
            missing.append(f"{qualified}: the name")
        if inspect.isclass(value) and value.__module__.startswith("starlette_jobs"):
            classes.append(value)
        elif inspect.isfunction(value) and not type(value).__name__.startswith("Fixture"):
            missing += [
                f"{qualified}: parameter {p}="
                for p in _optional_parameters(value)
                if not docs.names_parameter(name, p)
            ]
    for cls in classes:
        members: dict[str, object] = {}
        for base in reversed(cls.__mro__):
            if base.__module__.startswith("starlette_jobs"):
                members.update(vars(base))
        if dataclasses.is_dataclass(cls):
            members.update({f.name: f for f in dataclasses.fields(cls)})
        if issubclass(cls, enum.Enum):
            members = {}  # its members are its values, named where the statuses are
        where = f"{cls.__module__.split('.')[0]}.{cls.__name__}"
        for member, value in sorted(members.items()):
            if member.startswith("_"):
                continue
            if not docs.names_member(member):
                missing.append(f"{where}.{member}: the member")
            function = getattr(value, "__func__", value)  # a classmethod's function
            if inspect.isfunction(function):
                missing += [
                    f"{where}.{member}: parameter {p}="
                    for p in _optional_parameters(function)
                    if not docs.names_parameter(member, p)
                ]
        if cls in CONSTRUCTED:
            missing += [
                f"{where}(): parameter {p}="
                for p in _optional_parameters(cls)
                if not docs.names_parameter(cls.__name__, p)
            ]
    return missing


def test_every_public_name_member_and_parameter_is_named_by_some_page() -> None:
    """A public name no page explains is one a user finds only by reading the code: document it
    (docs/*.md or README.md), or make it private."""
    missing = undocumented_names(DocsText.read())
    assert missing == [], (
        "public, but named by no page of docs/ or README.md (explain each where a user would "
        "look for it, or make it private):\n" + "\n".join(missing)
    )


def test_the_public_names_check_finds_what_no_page_names() -> None:
    sections = [
        "# `Jobs`\n`record.status`, `accepted(request, job_id, retry_after=2)`",
        "## Options\n`configure(jobs=...)`",
        "## Answers\n`accepted`:\n\n- `headers`: more headers",
    ]
    docs = DocsText("\n".join(sections), sections, {("configure", "delay")})
    assert docs.names("Jobs")
    assert not docs.names("JobsConfig")
    assert docs.names_member("status")
    assert not docs.names_member("from_row")
    assert docs.names_parameter("configure", "delay")  # passed in a block
    assert docs.names_parameter("configure", "jobs")  # `jobs=` in a section naming it
    assert docs.names_parameter("accepted", "headers")  # in backticks in a section naming it
    assert docs.names_parameter("accepted", "retry_after")  # in a call written inline
    assert not docs.names_parameter("configure", "headers")
    assert not docs.names_parameter("accepted", "location")
    assert len(public_names()) > 40


def test_the_settings_of_workers_md_list_every_setting_of_jobs() -> None:
    """The block of docs/workers.md#settings passes each setting, and its table explains each."""
    page = (DOCS / "workers.md").read_text("utf-8")
    settings = [p for p in inspect.signature(Jobs).parameters if p != "dsn"]
    [block] = [b for b in python_blocks(DOCS / "workers.md") if "jobs.replace(" in b.code]
    call = next(
        node
        for node in ast.walk(ast.parse(block.code))
        if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "Jobs"
    )
    passed = {keyword.arg for keyword in call.keywords}
    rows = set(re.findall(r"^\| `(\w+)` \|", page, re.MULTILINE))
    assert [s for s in settings if s not in passed] == [], "not in the settings block"
    assert [s for s in [*settings, "dsn"] if s not in rows] == [], "no row in the settings table"


def test_every_file_of_the_tests_a_page_names_exists() -> None:
    """docs/logging.md once sent readers to a test file that did not exist."""
    named = {
        (page.name, path)
        for page in PAGES
        for path in re.findall(r"\btests/[\w/]+\.py\b", page.read_text("utf-8"))
    }
    assert len(named) > 10
    assert [f"{page}: {path}" for page, path in sorted(named) if not (ROOT / path).is_file()] == []


def test_every_module_the_architecture_page_names_exists() -> None:
    """docs/architecture.md names modules as paths under starlette_jobs/ (`worker/_attempt.py`)
    or under the repository (`tests/test_layout.py`): each must be there, so that the page
    cannot send a newcomer to a file that moved."""
    page = (ROOT / "docs" / "architecture.md").read_text("utf-8")
    named = set(re.findall(r"`([\w/]+\.(?:py|sql))`", page))
    named |= {f"{folder}sql/queries.sql" for folder in re.findall(r"`(\w+/)sql/`", page)}
    assert len(named) > 30  # the page names the modules, not a few of them
    missing = sorted(
        path
        for path in named
        if not (ROOT / "starlette_jobs" / path).is_file() and not (ROOT / path).is_file()
    )
    assert missing == []


def test_the_architecture_page_names_every_module() -> None:
    """And the other way round: a module added without a word on the page fails here."""
    page = (ROOT / "docs" / "architecture.md").read_text("utf-8")
    package = ROOT / "starlette_jobs"
    modules = sorted(
        path.relative_to(package).as_posix()
        for path in package.rglob("*.py")
        if path.name not in {"__init__.py", "__main__.py", "_version.py"}
    )
    assert [module for module in modules if f"`{module}`" not in page] == []
