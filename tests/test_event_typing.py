"""A user's event-reading file type-checks strict, with no ``Any`` reaching it.

``tests/typing/user_events.py`` reads payloads through ``ta.payload_of``; mypy
(``--strict --disallow-any-expr``, errors in trio_agent itself not reported) must
accept it, every ``assert_type`` included. Pyright runs too when it is installed
(``pyright`` on PATH, or ``PYRIGHT=/path/to/pyright``), in strict mode.
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


def test_mypy_strict_sees_no_any_in_a_users_event_code(cache: Path) -> None:
    done = _mypy(USER_FILE, cache)
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


def _pyright() -> str | None:
    return os.environ.get("PYRIGHT") or shutil.which("pyright")


@pytest.mark.skipif(_pyright() is None, reason="pyright is not installed (set PYRIGHT or put it on PATH)")
def test_pyright_strict_accepts_a_users_event_code(tmp_path: Path) -> None:
    pyright = _pyright()
    assert pyright is not None
    config = tmp_path / "pyrightconfig.json"
    config.write_text(json.dumps({"typeCheckingMode": "strict", "pythonVersion": "3.11", "extraPaths": [str(ROOT)]}))
    command = [pyright, "--pythonpath", sys.executable, "-p", str(config), "--outputjson", str(USER_FILE)]
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=300)
    report = json.loads(done.stdout)
    assert report["generalDiagnostics"] == [], done.stdout
    assert report["summary"]["filesAnalyzed"] == 1
