"""Every ```python block of docs/*.md and README.md runs, as written, against a real database.

The blocks of one page run in order in one namespace, so a later block can use what an earlier
one defined. A block preceded by `<!-- not-run: reason -->` is left out; few may be.
"""

from __future__ import annotations

import ast
import inspect
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from starlette_jobs._job import _started

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
PAGES = [*sorted(DOCS.glob("*.md")), ROOT / "README.md"]
EXPECTED_DOCS = {
    "cancelling.md",
    "events.md",
    "fastapi.md",
    "getting-started.md",
    "jobs-and-retries.md",
    "logging.md",
    "performance.md",
    "progress.md",
    "reliability.md",
    "requests.md",
    "testing.md",
    "tracing.md",
    "waiting.md",
    "workers.md",
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
    for block in python_blocks(page):
        if block.not_run is not None:
            continue
        result = eval(block.compiled(), namespace)
        if inspect.iscoroutine(result):
            await result
    assert not _started, f"{page.name} leaves a Jobs instance started"


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
