"""``serve --daemon`` when another local user makes the daemon's directory between the
check and its use. Without ``$XDG_RUNTIME_DIR`` the directory is
``/tmp/trio-agent-UID``, a name anyone may take first: the start checks that it is
the user's and private, but a directory that was missing then and made by someone
else before the start's own ``makedirs`` (``exist_ok``) was used as it was -- with a
``daemon.log`` the other user linked to a file of ours, which the start opened for
appending and handed to the daemon as its stderr (the daemon's own check then wrote
its refusal there).

The other user's move is made deterministic: it happens right after the first check
(at ``daemon_status``, the next step). Needs root, to make a directory owned by
another uid. Positive control: a directory that stays missing until the start makes it
gets the daemon, its log in it.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from trio_agent._daemon import _command

from ._daemon import daemon_env

OTHER_UID = 65534


@pytest.fixture
def directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    place = tmp_path / "trio-agent-daemon"
    for name, value in daemon_env(str(place)).items():
        monkeypatch.setenv(name, value)
    yield place
    stop = [sys.executable, "-m", "trio_agent", "serve", "--stop"]
    subprocess.run(stop, env=daemon_env(str(place)), capture_output=True, check=False, timeout=60)


@pytest.mark.skipif(os.geteuid() != 0, reason="making a directory owned by another uid needs root")
def test_a_directory_another_user_made_after_the_check_is_refused(
    directory: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    ours = tmp_path / "ours.txt"
    ours.write_text("precious\n")

    def another_user_moves(_directory: str | None = None) -> None:
        if directory.exists():
            return None  # moved already (the start asks again once its daemon answered, or not)
        directory.mkdir(mode=0o777)
        os.chmod(directory, 0o777)
        (directory / "daemon.log").symlink_to(ours)
        os.lchown(directory / "daemon.log", OTHER_UID, OTHER_UID)
        os.chown(directory, OTHER_UID, OTHER_UID)
        return None

    monkeypatch.setattr(_command, "daemon_status", another_user_moves)
    code = _command.start_daemon()
    assert ours.read_text() == "precious\n"
    assert code == 2
    assert f"belongs to uid {OTHER_UID}" in capsys.readouterr().err


def test_a_directory_made_by_the_start_gets_the_daemon(directory: Path) -> None:
    assert not directory.exists()
    assert _command.start_daemon() == 0
    assert (directory / "daemon.log").is_file() and not (directory / "daemon.log").is_symlink()
    assert os.stat(directory).st_mode & 0o777 == 0o700
    assert _command.daemon_status(str(directory)) is not None
