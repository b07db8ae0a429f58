"""The warm daemon serves a run against a non-OpenAI loopback server (``--profile
generic``: LiteLLM, vLLM, Ollama, ...), end to end: the daemon started from this
checkout's editable install (``python -m trio_agent`` from the worktree's ``.venv``, as
the README installs it), a real HTTP/SSE server (the bench's child-process server on
loopback), back-to-back runs. The first run of the configuration falls back and starts
a spare; the next is served warm by it, with the in-process run's answer. ``--profile``
was missing from the launcher's options, so every such run went in-process.
"""

from __future__ import annotations

from pathlib import Path

from trio_agent.cli._bench._server import Settings, open_bench_server

from ..cli._cli import cli_env, run_cli
from ._daemon import normalised, running_daemon


async def test_back_to_back_generic_profile_runs_are_served_warm(tmp_path: Path) -> None:
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    async with open_bench_server(Settings(delay=0.0, think=0.0, deltas=3)) as server:
        options = ("--profile", "generic", "--api-base", server.http_base_url, "--transport", "https",
                   "--workspace", str(workspace), "--ephemeral")
        with running_daemon() as daemon:
            env = {**daemon.env, "OPENAI_API_KEY": "dummy-local-key"}
            first = await run_cli("run", *options, "hello", cwd=tmp_path, env=env)
            assert first.returncode == 0, first.stderr.decode()
            spares = await daemon.settle()
            assert spares, "the first run started no spare for its configuration"
            warm = await run_cli("run", *options, "hello", cwd=tmp_path, env=env)
            taken = await daemon.served(spares)
            # at once, no pause: another spare of the key serves it (its replacement starts)
            left = spares - {taken}
            assert left, f"one spare per key here: {spares}"
            after = await run_cli("run", *options, "hello", cwd=tmp_path, env=env)
            await daemon.served(left)
            assert after.returncode == 0
        local = await run_cli("run", *options, "hello", cwd=tmp_path,
                              env=cli_env(OPENAI_API_KEY="dummy-local-key"))
    assert warm.returncode == local.returncode == 0
    assert normalised(warm.stdout) == normalised(local.stdout) == normalised(first.stdout)
    assert normalised(warm.stderr) == normalised(local.stderr)
