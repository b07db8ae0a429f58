"""An ``AGENTS.md`` a sandboxed command made to take the agent's memory.

``truncate -s 1T AGENTS.md`` in the workspace costs the command nothing; the next agent
opened on that workspace -- a resumed session, a new ``serve`` thread in the same
directory, a warm daemon's spare -- reads the project instructions in its own process.
Only ``AGENTS_MD_CAP`` bytes of them are used, so no more may be read: reading the file
whole is a ``MemoryError`` (or the OOM killer, which under ``serve`` ends every client's
thread). Positive control: a sound ``AGENTS.md`` is read whole, as before.

Runs with the address space capped (``_memory``): a reader that reads the whole file
fails at once instead of trying.
"""

from __future__ import annotations

from pathlib import Path

from trio_agent._runtime._turns._context_io import AGENTS_MD_CAP, load_agents_md

from ._memory import address_space_capped


def test_a_terabyte_agents_md_is_read_only_up_to_the_cap(tmp_path: Path) -> None:
    (tmp_path / ".git").mkdir()
    with (tmp_path / "AGENTS.md").open("wb") as file:
        file.write(b"# rules\n")
        file.truncate(1 << 40)
    with address_space_capped():
        text = load_agents_md(tmp_path)
    assert text is not None and text.startswith("# rules") and len(text) <= AGENTS_MD_CAP


def test_a_sound_agents_md_is_read_whole(tmp_path: Path) -> None:
    (tmp_path / ".git").mkdir()
    (tmp_path / "AGENTS.md").write_text("# rules\n\nbe brief\n")
    with address_space_capped():
        assert load_agents_md(tmp_path) == "# rules\n\nbe brief"
