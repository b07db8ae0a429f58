"""Users' files type-check strict, errors in trio_agent itself not reported.

The test kit's read values are typed (issue 24): ``mypy --strict --disallow-any-expr``
accepts ``user_testing_kit.py``. A user's typed tools are typed (issue 28 item 2):
``mypy --strict`` accepts ``user_typed_tools.py`` (pydantic models, ``Annotated``
constraints, sync tools and handlers; not ``--disallow-any-expr``, since
``pydantic.Field`` itself returns ``Any``), and that file really builds its tools. The
same harness rejects a file that lets an ``Any`` through and a handler of the wrong
shape, so the checks can fail."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "tests" / "typing" / "user_testing_kit.py"
TOOLS_SAMPLE = ROOT / "tests" / "typing" / "user_typed_tools.py"
NO_ANY = ("--disallow-any-expr",)


def _mypy(path: Path, cache: Path, *flags: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "mypy", "--strict", *flags, "--follow-imports=silent",
               "--no-error-summary", "--cache-dir", str(cache), str(path)]
    return subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=300, check=False)


@pytest.fixture(scope="module")
def cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("mypy-cache")


def test_a_users_test_sees_no_any_from_the_kit(cache: Path) -> None:
    done = _mypy(SAMPLE, cache, *NO_ANY)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout == ""


LOOSE = "import json\n\ndef body(text: str) -> object:\n    return json.loads(text)['model']\n"
WRONG_HANDLER = (
    "import trio_agent as ta\n\ndef handler(args: int) -> str:\n    return ''\n\n"
    "tools = ta.Tools.default().function('f', 'F.', {'type': 'object'}, handler)\n"
)


@pytest.mark.parametrize(("source", "flags", "line"), [(LOOSE, NO_ANY, 4), (WRONG_HANDLER, (), 6)],
                         ids=["an_any", "a_handler_of_the_wrong_shape"])
def test_the_harness_catches(tmp_path: Path, cache: Path, source: str, flags: tuple[str, ...], line: int) -> None:
    bad = tmp_path / "bad.py"
    bad.write_text(source, encoding="utf-8")
    done = _mypy(bad, cache, *flags)
    assert done.returncode == 1 and f"bad.py:{line}: error" in done.stdout, done.stdout


def test_a_users_typed_tools_pass_mypy_strict(cache: Path) -> None:
    done = _mypy(TOOLS_SAMPLE, cache)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout == ""


def test_the_typed_tools_sample_builds_its_tools() -> None:
    """The checked file is a real one: its tools are made and registered without error."""
    code = f"import runpy; runpy.run_path({str(TOOLS_SAMPLE)!r})['tools']()"
    subprocess.run([sys.executable, "-c", code], cwd=ROOT, check=True, timeout=120)
