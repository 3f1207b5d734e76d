"""The version (`_version`): one string, PEP 440, that the package, its build, the tracer and the
CLI all read. The tracer's and the CLI's use of it are in test_tracing.py and
integration/test_cli.py."""

from __future__ import annotations

import tomllib
from pathlib import Path

from packaging.version import Version

import starlette_jobs
from starlette_jobs._version import __version__

ROOT = Path(__file__).resolve().parents[1]


def test_the_version_is_a_pep_440_release_string() -> None:
    assert str(Version(__version__)) == __version__


def test_the_package_exports_this_very_version() -> None:
    assert starlette_jobs.__version__ is __version__


def test_the_build_reads_the_version_from_this_module() -> None:
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert "version" in pyproject["project"]["dynamic"]
    assert pyproject["tool"]["setuptools"]["dynamic"]["version"] == {
        "attr": "starlette_jobs._version.__version__"
    }


def test_the_module_imports_nothing_so_the_build_can_read_it_alone() -> None:
    source = (ROOT / "starlette_jobs" / "_version.py").read_text()
    assert "import" not in source
