"""A user's typed tools type-check strict (issue 28 item 2): ``mypy --strict`` accepts
``user_typed_tools.py`` (pydantic models, ``Annotated`` constraints, sync tools and
handlers), and the same harness rejects a handler of the wrong shape, so it can fail."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "tests" / "typing" / "user_typed_tools.py"


def _mypy(path: Path, cache: Path) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "mypy", "--strict", "--follow-imports=silent", "--no-error-summary",
               "--cache-dir", str(cache), str(path)]
    return subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=300, check=False)


@pytest.fixture(scope="module")
def cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("mypy-cache")


def test_a_users_typed_tools_pass_mypy_strict(cache: Path) -> None:
    done = _mypy(SAMPLE, cache)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout == ""


def test_the_harness_catches_a_handler_of_the_wrong_shape(tmp_path: Path, cache: Path) -> None:
    wrong = tmp_path / "wrong_handler.py"
    wrong.write_text(
        "import trio_agent as ta\n\n"
        "def handler(args: int) -> str:\n    return ''\n\n"
        "tools = ta.Tools.default().function('f', 'F.', {'type': 'object'}, handler)\n",
        encoding="utf-8",
    )
    done = _mypy(wrong, cache)
    assert done.returncode == 1 and "wrong_handler.py:6: error" in done.stdout, done.stdout


def test_the_sample_builds_its_tools() -> None:
    """The checked file is a real one: its tools are made and registered without error."""
    code = f"import runpy; runpy.run_path({str(SAMPLE)!r})['tools']()"
    subprocess.run([sys.executable, "-c", code], cwd=ROOT, check=True, timeout=120)
