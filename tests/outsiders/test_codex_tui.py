"""The codex TUI (``codex --remote ws://...``, the real codex 0.171.0) drives
``trio-agent serve`` (issue 22 item 5), as its user would: in a tmux pane of a fixed
size, type a prompt and Enter, and see the answer on the screen; a second prompt, then
rewind (Esc Esc, Enter: the TUI's ``thread/revert``) -- on the built-in local model and
on a loopback fake Responses server.

On main the TUI died at start-up (``account/read failed ... -32601``). The pane is an
OS fact, polled with a bound (``_codex_remote.wait_until``). Every message trio-agent
sent is checked against the codex schema (through the logging proxy); every TCP
connection codex holds is to 127.0.0.1; after the tmux server is killed, codex and
tmux are gone, checked by pid.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import trio

from .._os_facts import pid_alive, wait_gone
from ._codex_remote import POLL, STEP, Served, codex, codex_environment, read_turns, served, tcp_peers

COLUMNS, ROWS = 120, 40
READY = "Ask Codex to do anything"  # the composer's placeholder: the TUI is up and waits for a prompt


class Tmux:
    """A tmux server of the test's own (its socket and configuration under the test's
    directory); a pane whose program exits stays on screen, so a TUI that dies at
    start-up leaves its last words for the failure message."""

    def __init__(self, directory: Path) -> None:
        self.socket = directory / "tmux.sock"
        self.config = directory / "tmux.conf"
        self.config.write_text("set -g remain-on-exit on\n")

    async def run(self, *args: str, check: bool = True) -> str:
        with trio.fail_after(STEP):
            done = await trio.run_process(["tmux", "-S", str(self.socket), "-f", str(self.config), *args],
                                          capture_stdout=True,
                                          capture_stderr=True, check=False)
        assert done.returncode == 0 or not check, done.stderr.decode()
        return done.stdout.decode()

    async def screen(self) -> str:
        return await self.run("capture-pane", "-p", "-J", "-t", "codex")

    async def value(self, name: str) -> int:
        return int((await self.run("display-message", "-p", "-t", "codex", f"#{{{name}}}")).strip())


async def _show(tmux: Tmux, text: str, what: str) -> None:
    """Poll the pane (an OS fact) until ``text`` is on it, for at most ``STEP`` seconds."""
    screen = ""
    with trio.move_on_after(STEP):
        # (wrapped lines joined; a pane is an OS fact no event announces)
        while text not in " ".join((screen := await tmux.screen()).split()):  # noqa: ASYNC110
            await trio.sleep(POLL)
        return
    raise AssertionError(f"{what}: {text!r} did not appear within {STEP} s; the screen was:\n{screen}")


_TURN_DONE = "Worked for"  # the line the TUI prints when a turn has completed


async def _appears(tmux: Tmux, text: str, seconds: float) -> bool:
    """Whether ``text`` is on the pane within ``seconds`` (polled, as ``_show``)."""
    with trio.move_on_after(seconds):
        while text not in " ".join((await tmux.screen()).split()):  # noqa: ASYNC110
            await trio.sleep(POLL)
        return True
    return False


async def _start(server: Served, tmux: Tmux) -> int:
    """The TUI on ``server``, up and waiting for a prompt; codex's pid."""
    env = codex_environment(server.workspace.parent, server.workspace)
    await tmux.run("new-session", "-d", "-s", "codex", "-x", str(COLUMNS), "-y", str(ROWS), "-c",
                   str(server.workspace), "env", *(f"{key}={value}" for key, value in env.items()), codex(),
                   "--remote", server.url)
    pid = await tmux.value("pane_pid")  # tmux ran env, which became codex (no shell in between)
    await _show(tmux, READY, "the TUI starting up")
    return pid


async def _ask(server: Served, tmux: Tmux, prompt: str) -> None:
    """Type ``prompt`` into the composer, Enter, and wait for its answer on the screen."""
    await tmux.run("send-keys", "-t", "codex", "-l", prompt)
    await _show(tmux, prompt, "the typed prompt in the composer")
    done = (await tmux.screen()).count(_TURN_DONE)
    await tmux.run("send-keys", "-t", "codex", "Enter")
    await _show(tmux, server.answer(prompt), "the answer on the screen")
    # ...and the turn over for the TUI too: a prompt typed while it still thinks the turn
    # runs is sent as turn/steer, which the server refuses (seen in CI on a loaded machine).
    with trio.move_on_after(STEP):
        while (await tmux.screen()).count(_TURN_DONE) <= done:  # noqa: ASYNC110
            await trio.sleep(POLL)
        return
    raise AssertionError(f"the TUI never showed the turn's end ({_TURN_DONE!r}):\n{await tmux.screen()}")


async def _rewind(tmux: Tmux) -> None:
    """Esc Esc opens the transcript at the last prompt; Enter rewinds to before it
    (the TUI calls thread/revert)."""
    # One Escape at a time until the browser shows (bounded): a key that lands while the
    # TUI is still finishing the turn on a loaded machine is taken as something else
    # (seen in CI: both Escapes sent, no browser within 60 s), so the pair is not sent blind.
    for _ in range(12):
        await tmux.run("send-keys", "-t", "codex", "Escape")
        if await _appears(tmux, "Browsing transcript", 2.0):
            break
    await _show(tmux, "Browsing transcript", "the transcript browser")
    await tmux.run("send-keys", "-t", "codex", "Enter")
    await _show(tmux, "Conversation reverted to this point", "the rewind")


@pytest.mark.parametrize("model", ["local", "fake"])
async def test_the_codex_tui_shows_the_answer_to_a_typed_prompt(tmp_path: Path, model: str) -> None:
    tmux = Tmux(tmp_path)
    async with served(tmp_path, model) as server:
        try:
            pid = await _start(server, tmux)
            tmux_pid = await tmux.value("pid")
            await _ask(server, tmux, "hello from the tui")
            await _ask(server, tmux, "a second prompt")
            await _rewind(tmux)
            assert tcp_peers(pid) <= {"127.0.0.1"}, tcp_peers(pid)  # nothing but loopback
        finally:
            with trio.CancelScope(shield=True):
                await tmux.run("kill-server", check=False)
        await wait_gone([pid, tmux_pid])
        assert not pid_alive(pid) and not pid_alive(tmux_pid)

        methods = server.proxy.client_methods()
        for fatal in ("account/read", "config/read", "configRequirements/read"):  # the TUI stops without these
            assert fatal in methods
        assert "turn/start" in methods
        for fatal in ("account/read", "config/read", "configRequirements/read"):
            answers = server.proxy.responses(fatal)
            assert answers and all("result" in answer for answer in answers)
        assert server.check_every_server_message() > 20
        names = [message for message, answered in server.proxy.server_messages()
                 if message.get("method") == "thread/name/updated"]
        # The TUI names the thread (after its first prompt, or a title a model wrote) with thread/name/set.
        assert names and names[-1]["params"]["threadName"]
        if server.fake is not None:
            assert any("hello from the tui" in str(request["input"]) for request in server.fake.requests)
        # The rewind dropped the second turn from the thread (thread/revert), as the screen said.
        (revert,) = [message["params"] for direction, message in server.proxy.log
                     if direction == "client" and message.get("method") == "thread/revert"]
        assert [answer.get("error") for answer in server.proxy.responses("thread/revert")] == [None]
        turns = await read_turns(server, revert["threadId"])
        assert len(turns) == 1 and turns[0]["id"] != revert["beforeTurnId"]
        assert turns[0]["items"][0]["content"][0]["text"] == "hello from the tui"
