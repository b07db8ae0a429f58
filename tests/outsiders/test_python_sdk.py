"""The official Python SDK (``openai-codex`` 0.163.0, ``openai_codex``) drives trio-agent
unmodified: ``CodexConfig(codex_bin=...)`` names the executable, no
``launch_args_override``, and the SDK builds its own argv
(``[bin, --config kv..., app-server, --listen, stdio://]``).

Scenario, on the built-in local model and on a loopback fake Responses server (a
``model_providers.<id>`` with ``base_url`` and ``env_key``, as ``-c`` overrides): thread
start, a text turn, a ``run: echo`` turn whose command runs, thread read and list,
resume (once without turns: ``excludeTurns``, which the SDK only sends after reading
this server's schema because it reports version 0.0.0), a turn on the resumed thread,
fork and a turn on the fork, compaction, the SDK's refusal of ``turnTrigger`` (not in
this server's schema), model list. ``codex_bin`` is a tiny wrapper that keeps what
passes both ways, and every message trio-agent sent is validated against codex's
schema. A last test names the venv's console script itself as ``codex_bin``.

Fails on main: the SDK's ``app-server`` argv is ``invalid choice``.
"""

from __future__ import annotations

import json
import os
import re
import sys
from pathlib import Path
from typing import Any

import trio

from trio_agent.testing import FakeConnection, FakeResponsesServer

from .._os_facts import wait_gone
from ..serve._harness import Model, send_message
from ..serve._schema import validate_server_message

DRIVER = Path(__file__).with_name("_python_sdk_driver.py")
TRIO_AGENT = Path(sys.executable).parent / "trio-agent"  # the venv's console script
DEADLINE = 240  # seconds for a whole scenario (real processes, a real SDK)
MARK = "sdk-said-this"
Json = dict[str, Any]


def _env(tmp_path: Path, **extra: str) -> dict[str, str]:
    """The driver's (and so the server's) environment: scratch homes, no real credential."""
    (tmp_path / "codex-home").mkdir(exist_ok=True)
    env = {**os.environ, "CODEX_HOME": str(tmp_path / "codex-home"), "TRIO_AGENT_HOME": str(tmp_path / "home"),
           "TRIO_AGENT_NO_DAEMON": "1", **extra}
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "OPENAI_API_BASE_URL", "OPENAI_RESPONSES_WEBSOCKET_URL"):
        if name not in extra:
            env.pop(name, None)
    return env


def _wrapper(tmp_path: Path) -> Path:
    """``codex_bin``: runs trio-agent in its own place (``exec``), keeping each process's
    argv, stdin and stdout under ``logs/<pid>.*``."""
    logs = tmp_path / "logs"
    logs.mkdir()
    wrapper = tmp_path / "codex"
    wrapper.write_text(f"""#!/bin/bash
log="{logs}/$$"
printf '%s\\n' "$@" > "$log.argv"
exec "{TRIO_AGENT}" "$@" < <(exec tee "$log.in") > >(exec tee "$log.out")
""")
    wrapper.chmod(0o755)
    return wrapper


async def _drive(tmp_path: Path, codex_bin: Path, env: dict[str, str], config: list[str], scenario: str) -> Json:
    workspace = tmp_path / "workspace"
    workspace.mkdir(exist_ok=True)
    spec = {"codex_bin": str(codex_bin), "cwd": str(workspace), "env": {}, "config": config,
            "scenario": scenario, "mark": MARK}
    with trio.fail_after(DEADLINE):
        done = await trio.run_process([sys.executable, str(DRIVER), json.dumps(spec)], capture_stdout=True,
                                      capture_stderr=True, cwd=tmp_path, env=env, check=False)
    assert done.returncode == 0, done.stderr.decode()[-4000:]
    result: Json = json.loads(done.stdout.decode().strip().splitlines()[-1])
    return result


def _validate_logs(tmp_path: Path) -> tuple[list[list[str]], list[int]]:
    """Validate every message each trio-agent process sent; each process's argv and pid."""
    argvs: list[list[str]] = []
    pids: list[int] = []
    checked = 0
    for argv_file in sorted((tmp_path / "logs").glob("*.argv")):
        pid = int(argv_file.name.split(".")[0])
        pids.append(pid)
        argvs.append(argv_file.read_text().splitlines())
        asked: dict[str, str] = {}
        for line in argv_file.with_suffix(".in").read_text().splitlines():
            message = json.loads(line)
            if "method" in message and "id" in message:
                asked[message["id"]] = message["method"]
        for line in argv_file.with_suffix(".out").read_text().splitlines():
            message = json.loads(line)
            answered = asked.get(message.get("id")) if "method" not in message else None
            validate_server_message(message, answered)
            checked += 1
    assert checked > 20, checked
    return argvs, pids


def _check_scenario(out: Json) -> None:
    assert out["version"].split()[0] == "0.0.0" and out["user_agent"].startswith("trio-agent/0.0.0 (trio-agent ")
    assert out["hello"]["status"] == "completed" and out["hello"]["usage"] and "hello" in out["hello"]["final"]
    command = out["command"]
    assert command["status"] == "completed" and command["unknown"] == []  # the SDK's models took every notification
    shell = [c for c in command["commands"] if re.search(rf"\becho {MARK}\b", c["command"])
             and not c["command"].lstrip().startswith("const ")]
    assert shell and shell[-1]["exitCode"] == 0 and MARK in shell[-1]["aggregatedOutput"], command["commands"]
    assert out["read"] == {"id": out["thread_id"], "turns": ["completed", "completed"], "preview": "hello"}
    assert out["thread_id"] in out["list"]
    assert out["resumed"]["id"] == out["resumed_without_turns"] == out["thread_id"]
    assert len(out["resumed"]["turns"]) == 2
    assert out["after_resume"]["status"] == "completed" and "after resume" in out["after_resume"]["final"]
    fork = out["fork"]
    assert fork["id"] != out["thread_id"] and fork["run"]["status"] == "completed"
    assert fork["turns"][:3] == fork["source_turns"][:3] and len(fork["turns"]) == 4  # 3 copied, 1 of its own
    assert out["compact"] == {}
    assert out["gated"] is not None and "does not support turnTrigger" in out["gated"]
    assert out["models"]


def _check_argvs(argvs: list[list[str]], config: list[str]) -> None:
    overrides = [arg for kv in config for arg in ("--config", kv)]
    served = [argv for argv in argvs if argv[-3:] == ["app-server", "--listen", "stdio://"]]
    assert served == [[*overrides, "app-server", "--listen", "stdio://"]], argvs
    (schema,) = [argv for argv in argvs if "generate-json-schema" in argv]  # asked once, for excludeTurns
    assert schema[:-1] == [*overrides, "app-server", "generate-json-schema", "--experimental", "--out"]


async def test_python_sdk_on_the_local_model(tmp_path: Path) -> None:
    out = await _drive(tmp_path, _wrapper(tmp_path), _env(tmp_path), [], "full")
    _check_scenario(out)
    assert "local scripted model" in out["hello"]["final"]
    argvs, pids = _validate_logs(tmp_path)
    _check_argvs(argvs, [])
    await wait_gone(pids)


def _text(item: Json) -> str:
    content = item.get("content") or item.get("output") or ""
    return content if isinstance(content, str) else "\n".join(part.get("text", "") for part in content)


async def _fake_reply(conn: FakeConnection, request: Json) -> None:
    """A scripted model: ``run: CMD`` calls ``exec`` (which runs CMD through
    ``tools.exec_command``), a tool output is quoted, anything else echoed."""
    last = (request.get("input") or [{}])[-1]
    response_id = f"resp-fake-{len(conn.requests)}"
    if last.get("type") in ("custom_tool_call_output", "function_call_output"):
        await send_message(conn, response_id, "the command said: " + _text(last).strip())
        return
    prompt = _text(last).strip()
    if prompt.startswith("run:"):
        script = f"const r = await tools.exec_command({{cmd: {json.dumps(prompt[4:].strip())}}});\ntext(r.output);"
        await conn.send_tool_call(response_id, f"call-{response_id}", "exec", script)
        return
    await send_message(conn, response_id, f"fake model heard: {prompt}")


async def test_python_sdk_on_a_loopback_model_provider(server: FakeResponsesServer, tmp_path: Path) -> None:
    config = ['model_provider="fake"', f'model_providers.fake.base_url="{server.http_base_url}"',
              'model_providers.fake.env_key="FAKE_KEY"']
    model = Model(server, _fake_reply)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(model.serve)
        out = await _drive(tmp_path, _wrapper(tmp_path), _env(tmp_path, FAKE_KEY="sk-fake"), config, "full")
        nursery.cancel_scope.cancel()
    _check_scenario(out)
    assert out["hello"]["final"] == "fake model heard: hello"
    assert model.requests and {h.headers["authorization"] for h in server.handshakes} == {"Bearer sk-fake"}
    argvs, pids = _validate_logs(tmp_path)
    _check_argvs(argvs, config)
    await wait_gone(pids)


async def test_python_sdk_names_archives_and_signs_in(server: FakeResponsesServer, tmp_path: Path) -> None:
    config = [f'openai_base_url="{server.http_base_url}"']
    model = Model(server, _fake_reply)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(model.serve)
        out = await _drive(tmp_path, _wrapper(tmp_path), _env(tmp_path, OPENAI_API_KEY="sk-env"), config, "extra")
        nursery.cancel_scope.cancel()
    assert out["name"] == "sdk-named" and out["output_schema"] == out["model"] == "completed"
    assert (out["listed"], out["archived"]) == (False, True) and out["account"] is not None
    assert out["after_login"]["status"] == "completed"
    keys = [h.headers["authorization"] for h in server.handshakes]
    assert keys[0] == "Bearer sk-env" and keys[-1] == "Bearer sk-sdk-login", keys
    _validate_logs(tmp_path)


async def test_python_sdk_runs_the_console_script_itself(tmp_path: Path) -> None:
    """``codex_bin`` = the venv's ``trio-agent`` console script, nothing in between."""
    assert TRIO_AGENT.is_file()
    out = await _drive(tmp_path, TRIO_AGENT, _env(tmp_path), [], "short")
    assert out["hello"]["status"] == "completed" and "local scripted model" in out["hello"]["final"]
