"""Fresh virtual environments with this checkout installed in them by pip, as a user does.

``fresh_venv(tmp, "editable")`` is the README's install (``pip install -e CHECKOUT``);
``fresh_venv(tmp, "wheel")`` builds a wheel of the checkout and installs it. Either way
the environment is new (``python -m venv``) and pip installs ``trio-agent`` into it
itself -- its console script, its metadata, its ``.pth`` file or its copied files.
What is not ours is borrowed, to stay fast and offline: a ``.pth`` file points the
new environment at a directory of links to everything installed in this test run's
environment except the trio-agent install itself (so the dependencies, pip and
hatchling are found, and pip sees them as installed), and pip runs with
``--no-index --no-build-isolation`` (hatchling comes with the ``[test]`` extra).
"""

from __future__ import annotations

import subprocess
import sys
import sysconfig
from pathlib import Path
from typing import Literal

from ._cli import ROOT

SITE = Path(sysconfig.get_paths()["purelib"])  # this test run's environment
# What pip put there for trio-agent itself (either kind of install): never borrowed.
_OURS = ("trio_agent", "trio_agent-", "_trio_agent_launch", "_editable_impl_trio_agent", "__editable__")
PIP = ("-m", "pip", "--disable-pip-version-check", "--no-input")


def _borrowed(tmp: Path) -> Path:
    deps = tmp / "borrowed-site-packages"
    deps.mkdir()
    for entry in SITE.iterdir():
        if not entry.name.startswith(_OURS) and entry.suffix != ".pth":
            (deps / entry.name).symlink_to(entry)
    return deps


def _pip(python: Path | str, *args: str) -> None:
    done = subprocess.run([str(python), *PIP, *args], capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stdout + done.stderr


def fresh_venv(tmp: Path, kind: Literal["editable", "wheel"]) -> Path:
    """A new environment in ``tmp / "venv"`` with this checkout installed; its ``bin``."""
    venv = tmp / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    version = f"python{sys.version_info.major}.{sys.version_info.minor}"
    (venv / "lib" / version / "site-packages" / "borrowed.pth").write_text(f"{_borrowed(tmp)}\n")
    python = venv / "bin" / "python"
    if kind == "editable":
        _pip(python, "install", "-q", "--no-index", "--no-build-isolation", "-e", f"{ROOT}[test]")
    else:
        wheels = tmp / "wheels"
        _pip(sys.executable, "wheel", "-q", "--no-index", "--no-build-isolation", "--no-deps", "-w", str(wheels),
             str(ROOT))
        (wheel,) = wheels.glob("trio_agent-*.whl")
        _pip(python, "install", "-q", "--no-index", str(wheel))
    assert (venv / "bin" / "trio-agent").exists()
    return venv / "bin"
