"""``trio-agent run --local`` with a user whose login profile is noisy (issue 24 item 5):
the console script in a subprocess, the built-in local model running a command
(``run: ...``, a ``login: true`` exec_command). Neither the user (stdout, stderr) nor
the model (the request that carries the output, seen in ``--jsonl``'s ``api.event``)
gets what the profile printed; the command sees what it exported. A profile that fails
is one ``api.warning`` and the command still runs, in a login shell as before."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from .._os_facts import processes_in
from ..tools.test_sandbox import host_pids, sleeper
from ..tools.test_shell_init_noise import NOISE_ERR, NOISE_OUT, REHASH, noisy_profile
from ..tools.test_shell_init_noise import home as home  # the fixture: a fake HOME under /var/tmp
from ._cli import cli_env, run_cli

PROMPT = "run: echo var=$PROFILE_VAR; profile-tool"


@pytest.mark.parametrize("mode", ["workspace-write", "read-only", "danger-full-access"])
async def test_the_profiles_output_reaches_neither_the_user_nor_the_model(
    workspace: Path, home: Path, mode: str
) -> None:
    background = sleeper()
    (home / ".bash_profile").write_text(noisy_profile(home, background))
    env = cli_env(HOME=str(home), SHELL="/bin/bash")
    human = await run_cli("run", "--local", "--sandbox", mode, "--workspace", str(workspace), PROMPT,
                          cwd=workspace, env=env)
    jsonl = await run_cli("run", "--local", "--jsonl", "--sandbox", mode, "--workspace", str(workspace), PROMPT,
                          cwd=workspace, env=env)
    for result in (human, jsonl):
        out, err = result.stdout.decode(), result.stderr.decode()
        assert result.returncode == 0, err
        assert "Traceback" not in out + err
        for noise in (NOISE_OUT, NOISE_ERR, REHASH):
            assert noise not in out and noise not in err
    # positive control: the command's output, shown on stderr (stdout carries only the answer)
    assert "  | var=from-the-profile\n  | profile-tool ran\n" in human.stderr.decode()
    events = [json.loads(line) for line in jsonl.stdout.decode().splitlines()]
    sent = [e["payload"]["event"] for e in events
            if e["type"] == "api.event" and e["payload"]["direction"] == "outbound"]
    outputs = [item for request in sent for item in request.get("input", [])
               if str(item.get("type")).endswith("_call_output")]
    assert outputs and "var=from-the-profile\\nprofile-tool ran\\n" in json.dumps(outputs)  # the model got it
    assert "api.warning" not in [e["type"] for e in events]
    assert host_pids(background) == [] and processes_in(workspace) == []


async def test_a_failing_profile_is_one_warning_and_the_command_still_runs(workspace: Path, home: Path) -> None:
    (home / ".bash_profile").write_text(
        f'if [ ! -e "{workspace}/failed-once" ]; then : > "{workspace}/failed-once"; exit 7; fi\n'
        "export PROFILE_VAR=from-the-profile\n"
        f'export PATH="{home}/bin:$PATH"\n'
    )
    result = await run_cli("run", "--local", "--jsonl", "--workspace", str(workspace), PROMPT, cwd=workspace,
                           env=cli_env(HOME=str(home), SHELL="/bin/bash"))
    assert result.returncode == 0, result.stderr.decode()
    assert "Traceback" not in result.stdout.decode() + result.stderr.decode()
    events = [json.loads(line) for line in result.stdout.decode().splitlines()]
    warnings = [e["payload"] for e in events if e["type"] == "api.warning"]
    assert [w["code"] for w in warnings] == ["shell_login_environment"]
    assert "/bin/bash -l exited with status 7" in warnings[0]["message"]
    [done] = [e["payload"] for e in events if e["type"] == "tool.result" and e["payload"]["tool"] == "exec_command"]
    assert json.loads(done["result"])["output"] == "var=from-the-profile\nprofile-tool ran\n"  # a login shell ran it
    assert processes_in(workspace) == []
