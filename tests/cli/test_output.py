"""What ``trio-agent run`` shows while a turn runs: a command's output as it arrives
(the console script in a subprocess), and the human printer fed events directly
(the "still running" line, retries, terminal safety) with the events' own times."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import trio_agent as ta
from trio_agent.cli._output import HumanPrinter, JsonlPrinter, terminal_safe
from trio_agent.cli._signals import Interrupts

from ._cli import cli_env, open_cli, progress, run_cli


async def test_command_output_is_shown_while_the_command_runs(tmp_path: Path) -> None:
    # The command prints a line, then waits for a file that only this test creates.
    prompt = "run: echo first-line; while [ ! -e go ]; do sleep 0.05; done; echo second-line"
    async with open_cli("run", "--workspace", str(tmp_path), prompt, cwd=tmp_path) as cli:
        await cli.wait_for(lambda c: "  | first-line\n" in c.stderr)  # progress: on stderr
        assert "  | second-line" not in cli.stderr and "[tool] exec_command ->" not in cli.stderr
        (tmp_path / "go").touch()
    assert cli.process.returncode == 0, cli.stderr
    lines = progress(cli.stderr)
    shown = lines.index("  | second-line")
    assert lines.index("  | first-line") < shown
    assert lines[shown + 1].startswith("[tool] exec_command -> completed in ")
    assert lines[-1].startswith("-- completed: 2 model call(s), ")
    assert cli.stdout.startswith("The tool returned:\n") and cli.stdout.endswith("first-line\nsecond-line\n")
    assert "[tool]" not in cli.stdout and "-- completed" not in cli.stdout  # stdout: the answer only


async def test_long_output_lines_are_cut(tmp_path: Path) -> None:
    result = await run_cli("run", "--workspace", str(tmp_path), "run: printf 'x%.0s' $(seq 500); echo",
                           cwd=tmp_path)
    assert result.returncode == 0, result.stderr.decode()
    streamed = [line for line in result.stderr.decode().splitlines() if line.startswith("  | x")]
    assert streamed == ["  | " + "x" * 193 + "..."]  # 200 columns: stderr is not a terminal


async def test_without_bubblewrap_the_fallback_is_one_clean_line(tmp_path: Path) -> None:
    no_bwrap = tmp_path / "bin"
    no_bwrap.mkdir()
    env = {"PATH": str(no_bwrap)}
    result = await run_cli("run", "--ephemeral", "--workspace", str(tmp_path), "hello", cwd=tmp_path,
                           env=cli_env(**env))  # --ephemeral: no session line
    assert result.returncode == 0, result.stderr.decode()
    notes = [line for line in result.stderr.decode().splitlines() if "sandbox" in line or "Warning" in line]
    assert notes == [
        "trio-agent: commands run without a sandbox (danger-full-access): Bubblewrap is not installed "
        "(bwrap on $PATH was not found); to confine commands, install Bubblewrap (Debian/Ubuntu: apt-get "
        "install bubblewrap; Fedora: dnf install bubblewrap)"
    ]
    assert result.stdout.decode().startswith("Hello from trio_agent's local scripted model.")
    configured = await run_cli("run", "--sandbox", "workspace-write", "--workspace", str(tmp_path), "hello",
                               cwd=tmp_path, env=cli_env(**env))
    assert configured.returncode == 2
    err = configured.stderr.decode()
    assert "Bubblewrap is not installed" in err and "--sandbox danger-full-access" in err
    assert "Traceback" not in err


# -- the printer, fed events ------------------------------------------------------------


def event(kind: str, time: float, turn_id: int | None = 1, **payload: Any) -> ta.AgentEvent:
    return ta.AgentEvent(ta.EventKind(kind), payload, seq=1, session_id="s", turn_id=turn_id, time=time)


def printer(interrupts: Interrupts | None = None) -> tuple[HumanPrinter, io.StringIO, io.StringIO]:
    out, err = io.StringIO(), io.StringIO()
    return HumanPrinter(interrupts or Interrupts(), out, err, width=40), out, err


def call(time: float, call_id: str = "call-1/code-1", tool: str = "exec_command") -> ta.AgentEvent:
    return event("tool.call", time, call_id=call_id, tool=tool, arguments={"cmd": "make"}, model_call_index=1)


def output(time: float, text: str, call_id: str = "call-1/code-1") -> ta.AgentEvent:
    return event("tool.progress", time, call_id=call_id, tool="exec_command", message=text, stream="output")


def result(time: float, status: str = "completed", call_id: str = "call-1/code-1",
           tool: str = "exec_command", duration: float = 1.0) -> ta.AgentEvent:
    return event("tool.result", time, call_id=call_id, tool=tool, status=status,
                 duration_ns=int(duration * 1e9), result="ok")


def test_a_quiet_tool_gets_a_still_running_line_every_ten_seconds() -> None:
    view, out, err = printer()
    view.on_event(call(100.0, "call-1", "exec"))
    view.on_event(call(100.5))
    view.tick(109.0)
    assert err.getvalue().count("still running") == 0
    view.tick(110.5)
    view.on_event(output(112.0, "building\n"))
    view.tick(121.0)  # it printed at 112: quiet for 9 s only
    view.tick(122.0)
    view.on_event(result(125.0, duration=24.5))
    view.tick(134.0)  # its exec cell runs on, quiet since the command ended
    view.on_event(result(136.0, call_id="call-1", tool="exec", duration=36.0))
    view.tick(200.0)  # nothing runs any more
    assert err.getvalue().splitlines()[2:] == [
        "  ... exec_command still running (10 s)",  # the innermost call only, not its exec cell
        "  | building",
        "  ... exec_command still running (22 s)",
        "[tool] exec_command -> completed in 24.5 s: ok",
        "  ... exec still running (34 s)",
        "[tool] exec -> completed in 36.0 s: ok",
    ]
    assert out.getvalue() == ""  # stdout carries only the answer


def test_output_is_shown_by_whole_lines_made_safe_and_cut() -> None:
    view, out, err = printer()
    view.on_event(call(1.0))
    view.on_event(output(1.1, "par"))
    view.on_event(output(1.2, "tial\n\x1b[31mred\x1b[0m\rprogress 50%\rprogress 100%\r\n" + "y" * 50 + "\nlast"))
    view.on_event(result(1.3))
    assert err.getvalue().splitlines()[1:] == [
        "  | partial",
        "  | progress 100%",
        "  | " + "y" * 33 + "...",
        "  | last",  # the rest without a newline, when the call ends
        "[tool] exec_command -> completed in 1.0 s: ok",
    ]
    assert out.getvalue() == ""  # stdout carries only the answer


def test_terminal_safe_drops_control_sequences() -> None:
    assert terminal_safe("a\x1b]0;title\x07b\x07c\x1b[2Jd\te") == "abcd    e"
    assert terminal_safe("one\rtwo\r") == "two"


def test_one_line_per_retry() -> None:
    view, out, err = printer()
    failure: dict[str, Any] = {
        "phase": "generation", "model_call_index": 1, "max_attempts": 5, "failure_phase": "stream",
        "connection_generation": 1, "server_requested_delay": False, "opens_new_socket": True,
        "replay_mode": "full_history",
    }
    view.on_event(event("model.attempt.retrying", 1.0, attempt=1, next_attempt=2, delay_ns=400_000_000,
                        error_class="premature_close", error="the socket closed", **failure))
    view.on_event(event("model.attempt.retrying", 2.0, attempt=2, next_attempt=3, delay_ns=50_000_000,
                        error_class="weird_new_thing", error="something odd\nwith details", **failure))
    assert err.getvalue().splitlines() == [
        "retrying in 0.4 s: connection lost (attempt 2/5)",
        "retrying in 50 ms: something odd (attempt 3/5)",
    ]
    assert out.getvalue() == ""  # stdout carries only the answer


def test_the_cancelled_line_says_what_was_cancelled() -> None:
    interrupts = Interrupts()
    view, out, err = printer(interrupts)
    assert view.cancelled_line(10.0).startswith("-- cancelled by Ctrl-C before the turn started, after 0 ms")
    view.on_event(event("run.started", 11.0))
    view.on_event(call(11.0, "call-1", "exec"))
    view.on_event(call(11.1))
    interrupts.signum, interrupts.at = 2, 13.0
    view.on_event(result(13.1, "cancelled"))
    view.on_event(result(13.1, "cancelled", "call-1", "exec"))
    terminal: dict[str, Any] = {
        "status": "cancelled", "model_calls": 1, "usage": {"total_tokens": 12}, "duration_ns": 2_100_000_000,
    }
    view.on_event(event("run.failed", 13.2, **terminal))
    assert "-- " not in err.getvalue()  # no summary of its own: the command prints the one line
    assert out.getvalue() == ""
    assert view.cancelled_line(10.0) == (
        "-- cancelled by Ctrl-C after 2.1 s: the turn, 1 model call(s), 12 tokens; stopped exec_command"
    )


def test_the_sandbox_fallback_is_one_line_on_stderr_in_both_modes() -> None:
    reason = "commands run without a sandbox (danger-full-access): Bubblewrap is not installed"
    fallback = event("sandbox.unavailable", 0.0, turn_id=None, mode="danger-full-access", reason=reason)
    view, out, err = printer()
    view.on_event(fallback)
    assert (out.getvalue(), err.getvalue()) == ("", f"trio-agent: {reason}\n")
    jsonl_err = io.StringIO()
    JsonlPrinter(Interrupts(), io.StringIO(), jsonl_err).track(fallback)
    assert jsonl_err.getvalue() == f"trio-agent: {reason}\n"


def test_a_message_without_deltas_is_shown_whole() -> None:
    view, out, err = printer()
    view.on_event(event("assistant.message", 1.0, text="all at once", model_call_index=1))
    view.on_event(event("assistant.delta", 2.0, text="stream", model_call_index=2))
    view.on_event(event("assistant.delta", 2.1, text="ed", model_call_index=2))
    view.on_event(event("assistant.message", 2.2, text="streamed", model_call_index=2))
    assert (out.getvalue(), err.getvalue()) == ("", "all at once\nstreamed\n")  # progress: stderr


def test_an_mcp_restart_is_one_line_on_stderr() -> None:
    view, out, err = printer()
    view.on_event(event("mcp.server.restarting", 1.0, turn_id=None, server="calc", attempt=2, max_attempts=5,
                        delay_ns=1_000_000_000, reason="the server closed the connection (did it exit?)"))
    assert err.getvalue().splitlines() == [
        "[mcp] calc lost its connection, restarting (2/5): the server closed the connection (did it exit?)"]
    assert out.getvalue() == ""
