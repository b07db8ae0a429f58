"""The test kit's read values are typed (issue 24): ``mypy --strict --disallow-any-expr``
accepts ``user_testing_kit.py`` (errors in trio_agent itself not reported), and the
same harness rejects a file that lets an ``Any`` through, so the check can fail."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "tests" / "typing" / "user_testing_kit.py"


def _mypy(path: Path, cache: Path) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "mypy", "--strict", "--disallow-any-expr", "--follow-imports=silent",
               "--no-error-summary", "--cache-dir", str(cache), str(path)]
    return subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=300, check=False)


@pytest.fixture(scope="module")
def cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("mypy-cache")


def test_a_users_test_sees_no_any_from_the_kit(cache: Path) -> None:
    done = _mypy(SAMPLE, cache)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout == ""


def test_the_harness_catches_an_any(tmp_path: Path, cache: Path) -> None:
    loose = tmp_path / "loose.py"
    loose.write_text("import json\n\ndef body(text: str) -> object:\n    return json.loads(text)['model']\n")
    done = _mypy(loose, cache)
    assert done.returncode == 1 and "loose.py:4: error" in done.stdout, done.stdout
