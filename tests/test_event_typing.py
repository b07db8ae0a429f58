"""A user's code type-checks strict, with no ``Any`` reaching it (issue 12).

``tests/typing/user_events.py`` reads payloads through ``ta.payload_of``;
``tests/typing/user_surface.py`` uses the rest of the public API (configs, turns,
typed tool handlers, threads, sessions, errors). mypy (``--strict
--disallow-any-expr``, errors in trio_agent itself not reported) and pyright (strict;
installed by the ``test`` extra, or ``PYRIGHT=/path/to/pyright``) must accept both,
every ``assert_type`` included, and together they name every public name.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
USER_FILE = ROOT / "tests" / "typing" / "user_events.py"
USER_FILES = (USER_FILE, ROOT / "tests" / "typing" / "user_surface.py")


def _mypy(path: Path, cache: Path) -> subprocess.CompletedProcess[str]:
    command = [
        sys.executable, "-m", "mypy", "--strict", "--disallow-any-expr", "--follow-imports=silent",
        "--no-error-summary", "--cache-dir", str(cache), str(path),
    ]
    return subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=300)


@pytest.fixture(scope="module")
def cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One mypy cache for both runs: the second reads trio_agent's analysis from it."""
    return tmp_path_factory.mktemp("mypy-cache")


@pytest.mark.parametrize("user_file", USER_FILES, ids=lambda path: path.stem)
def test_mypy_strict_sees_no_any_in_a_users_code(cache: Path, user_file: Path) -> None:
    done = _mypy(user_file, cache)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout == ""


def test_the_check_catches_any_read_from_a_raw_payload(tmp_path: Path, cache: Path) -> None:
    # The same harness on a file that reads ``event.payload`` directly (typed loosely):
    # it must fail, or the test above would prove nothing.
    raw = tmp_path / "raw_reader.py"
    raw.write_text(
        "import trio_agent as ta\n"
        "from typing import assert_type\n"
        "def status(event: ta.AgentEvent) -> None:\n"
        "    assert_type(event.payload['status'], str)\n",
        encoding="utf-8",
    )
    done = _mypy(raw, cache)
    assert done.returncode == 1
    assert "raw_reader.py:4: error" in done.stdout


def _pyright() -> str:
    beside = Path(sys.executable).parent / "pyright"  # the test extra installs it in the venv
    found = os.environ.get("PYRIGHT") or (str(beside) if beside.exists() else shutil.which("pyright"))
    assert found, "pyright is missing: install the test extra (pip install -e '.[test]') or set PYRIGHT"
    return found


def test_pyright_strict_accepts_a_users_code(tmp_path: Path) -> None:
    config = tmp_path / "pyrightconfig.json"
    config.write_text(json.dumps({"typeCheckingMode": "strict", "pythonVersion": "3.11", "extraPaths": [str(ROOT)]}))
    command = [_pyright(), "--pythonpath", sys.executable, "-p", str(config), "--outputjson", *map(str, USER_FILES)]
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=600)
    report = json.loads(done.stdout)
    assert report["generalDiagnostics"] == [], done.stdout
    assert report["summary"]["filesAnalyzed"] == len(USER_FILES)


def test_the_user_files_name_every_public_name() -> None:
    import trio_agent as ta

    text = "".join(path.read_text(encoding="utf-8") for path in USER_FILES)
    missing = [name for name in ta.__all__ if f"ta.{name}" not in text]
    assert missing == []
