"""What the command line's tests share: an importable module written by the test, and an app."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

import pytest

Module = Callable[[str, str], str]


@pytest.fixture
def module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Module:
    """`module(name, source)` writes an importable module; returns its name."""
    monkeypatch.syspath_prepend(str(tmp_path))

    def write(name: str, source: str) -> str:
        (tmp_path / f"{name}.py").write_text(source)
        monkeypatch.delitem(sys.modules, name, raising=False)
        return name

    return write


APP = """
from starlette_jobs import Jobs
jobs = Jobs("postgresql://app@db/app", queues={"emails": 3}, batch_size=50)
app = object()
"""
