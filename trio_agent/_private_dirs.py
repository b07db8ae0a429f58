"""Directories only their owner can enter, for the homes we create (sec4's review).

Rollout, thread-store and index files are created 0600, but ``mkdir(parents=True)``
made the folders above them with the umask's mode (0755 here): another local user could
list every session id, its day and its thread titles' files. Each folder we create on the
way is 0700; a folder that already exists is the user's choice and is left as it is.
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["make_private_dirs"]


def make_private_dirs(path: Path) -> None:
    """``path.mkdir(parents=True, exist_ok=True)``, each folder it creates 0700
    (``FileExistsError`` when ``path`` or an ancestor exists and is not a folder)."""
    try:
        os.mkdir(path, 0o700)
    except FileNotFoundError:
        if path.parent == path:
            raise
        make_private_dirs(path.parent)
        try:
            os.mkdir(path, 0o700)
        except FileExistsError:  # made meanwhile by another writer
            if not path.is_dir():
                raise
    except FileExistsError:
        if not path.is_dir():
            raise
