"""The official TypeScript SDK (``@openai/codex-sdk``, pinned) drives ``trio-agent exec``
unmodified: ``new Codex({codexPathOverride: <the venv's trio-agent>})``, run by node.

The driver script does what ``ts-sdk_real-codex-0.171.0.jsonl`` records the SDK doing
with the real codex -- turn "hello", then a second turn on the same thread (the SDK
runs ``exec ... resume <id>`` in a new process) with a shell command -- plus a failed
turn, one streamed turn (every event it yields is checked against the SDK's types) and
one aborted through an ``AbortSignal`` (node sends SIGTERM) while its command runs. It
prints what the SDK returned as JSON; the test asserts on that, and by pid that the
aborted command and every exec process are gone. Once on the built-in local model (no
key: nothing leaves the machine), once on the loopback fake model.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import trio

from .._os_facts import pid_alive, wait_gone, wait_no_processes_in
from .._shell_line import is_shell_line
from ..cli._cli import cli_env
from ..exec._exec import model_server
from ..exec._exec_schema import check_event
from ..exec._fake_model import GREETING, REFUSAL
from ._clients import node, ts_sdk

Json = dict[str, Any]
TRIO_AGENT = Path(sys.executable).with_name("trio-agent")
SCRIPT_SECONDS = 180

DRIVER = r"""
import { Codex } from %(sdk)s;
import { existsSync, readFileSync } from "node:fs";

const cfg = JSON.parse(process.argv[2]);
const codex = new Codex({ codexPathOverride: cfg.bin, env: cfg.env, ...cfg.codexOptions });
const options = { model: "gpt-5.5", sandboxMode: "danger-full-access", workingDirectory: cfg.workspace,
                  skipGitRepoCheck: true, ...cfg.threadOptions };
const out = {};
const thread = codex.startThread(options);
out.first = { ...(await thread.run("hello")), threadId: thread.id };
out.second = { ...(await thread.run("run: echo hi-from-shell")), threadId: thread.id };

const failing = cfg.failResume ? codex.resumeThread(cfg.failResume, options) : codex.startThread(options);
try { await failing.run(cfg.failPrompt); out.failed = null; } catch (e) { out.failed = String(e.message); }

out.streamed = [];
const streamed = await thread.runStreamed("hello");
for await (const event of streamed.events) out.streamed.push(event);

const controller = new AbortController();
out.aborted = { seen: [] };
const running = await thread.runStreamed(`run: echo $$ > ${cfg.pidFile}; exec sleep 60`,
                                         { signal: controller.signal });
try {
  for await (const event of running.events) {
    out.aborted.seen.push(event);
    if (event.type === "item.started" && event.item.type === "command_execution"
        && event.item.command.includes("sleep 60")) {
      for (let i = 0; i < 1000 && !(existsSync(cfg.pidFile) && readFileSync(cfg.pidFile, "utf8").trim()); i++)
        await new Promise((resolve) => setTimeout(resolve, 10));  // the command has written its pid
      out.aborted.pid = Number(readFileSync(cfg.pidFile, "utf8"));
      controller.abort();
    }
  }
  out.aborted.error = null;
} catch (e) { out.aborted.error = e.name; }
console.log(JSON.stringify(out));
"""


SCHEMA_DRIVER = r"""
import { Codex } from %(sdk)s;
const cfg = JSON.parse(process.argv[2]);
const codex = new Codex({ codexPathOverride: cfg.bin, env: cfg.env, baseUrl: cfg.baseUrl, apiKey: "sdk-key" });
const thread = codex.startThread({ workingDirectory: cfg.workspace, skipGitRepoCheck: true });
console.log(JSON.stringify(await thread.run("hello", { outputSchema: cfg.schema })));
"""


async def run_driver(tmp_path: Path, env: dict[str, str], *, fail_prompt: str, fail_resume: str | None,
                     codex_options: Json | None = None, thread_options: Json | None = None) -> Json:
    workspace, spawn_dir = tmp_path / "project", tmp_path / "node"
    workspace.mkdir()
    spawn_dir.mkdir()
    script = tmp_path / "driver.mjs"
    sdk = (ts_sdk() / "dist" / "index.js").as_uri()
    script.write_text(DRIVER % {"sdk": json.dumps(sdk)})
    cfg = {"bin": str(TRIO_AGENT), "env": env, "workspace": str(workspace), "pidFile": str(tmp_path / "cmd.pid"),
           "failPrompt": fail_prompt, "failResume": fail_resume, "codexOptions": codex_options or {},
           "threadOptions": thread_options or {}}
    node_binary = node()
    assert node_binary is not None
    with trio.fail_after(SCRIPT_SECONDS):
        done = await trio.run_process([node_binary, str(script), json.dumps(cfg)], cwd=spawn_dir, env=env,
                                      capture_stdout=True, capture_stderr=True, check=False,
                                      stdin=subprocess.DEVNULL)
    assert done.returncode == 0, done.stderr.decode()[-3000:]
    result: Json = json.loads(done.stdout.decode().strip().splitlines()[-1])
    # Nothing is left: the aborted command, and every exec process (they run in spawn_dir).
    await wait_gone([result["aborted"]["pid"]])
    await wait_no_processes_in(spawn_dir)
    await wait_no_processes_in(workspace)
    return result


def common_checks(result: Json) -> tuple[Json, Json]:
    first, second = result["first"], result["second"]
    assert isinstance(first["threadId"], str) and second["threadId"] == first["threadId"]
    (message,) = first["items"]
    assert message == {"id": "item_0", "type": "agent_message", "text": first["finalResponse"]}
    shell = [item for item in second["items"] if item["type"] == "command_execution"
             and is_shell_line(item["command"], "echo hi-from-shell")]
    assert len(shell) == 1 and shell[0]["exit_code"] == 0 and shell[0]["status"] == "completed"
    assert shell[0]["aggregated_output"].endswith("hi-from-shell\n")
    assert "hi-from-shell" in second["finalResponse"]
    for turn in (first, second):
        assert set(turn["usage"]) == {"input_tokens", "cached_input_tokens", "cache_write_input_tokens",
                                      "output_tokens", "reasoning_output_tokens"}
    streamed = result["streamed"]
    for event in streamed + result["aborted"]["seen"]:
        check_event(event)
    assert [e["type"] for e in streamed][:2] == ["thread.started", "turn.started"]
    assert streamed[0]["thread_id"] == first["threadId"] and streamed[-1]["type"] == "turn.completed"
    aborted = result["aborted"]
    assert aborted["error"] == "AbortError" and not pid_alive(aborted["pid"])
    return first, second


async def test_the_typescript_sdk_on_the_local_model(tmp_path: Path) -> None:
    env = cli_env(TRIO_AGENT_HOME=str(tmp_path / "home"))
    result = await run_driver(tmp_path, env, fail_prompt="hello", fail_resume="01a2338d-2ce8-75f0-88ba-4846b1edb5a6")
    first, _second = common_checks(result)
    assert "You said: 'hello'" in first["finalResponse"]
    # A thread that does not exist: exec says why on stderr and exits 1; the SDK throws it.
    assert result["failed"].startswith("Codex Exec exited with code 1")
    assert "thread not found: 01a2338d-2ce8-75f0-88ba-4846b1edb5a6" in result["failed"]


async def test_the_typescript_sdk_on_a_fake_responses_server(tmp_path: Path) -> None:
    """With the options of ts-sdk-extra_real-codex.jsonl: the key and base URL as the
    SDK's ``apiKey``/``baseUrl`` (``CODEX_API_KEY``, ``--config openai_base_url=``), codex
    config (``--config`` flattened) and every thread option."""
    async with model_server() as server:
        env = cli_env(TRIO_AGENT_HOME=str(tmp_path / "home"))
        codex_options = {"baseUrl": server.http_base_url, "apiKey": "sdk-key",
                         "config": {"show_raw_agent_reasoning": False, "model_verbosity": "low"}}
        thread_options = {"modelReasoningEffort": "low", "networkAccessEnabled": False, "webSearchMode": "disabled",
                          "approvalPolicy": "never", "additionalDirectories": [str(tmp_path)]}
        result = await run_driver(tmp_path, env, fail_prompt="refuse this", fail_resume=None,
                                  codex_options=codex_options, thread_options=thread_options)
        model_requests = [r for r in server.requests if r.get("generate") is not False]
        authorizations = {handshake.headers.get("authorization") for handshake in server.handshakes}
    first, second = common_checks(result)
    assert first["finalResponse"] == GREETING
    assert first["usage"] == {"input_tokens": 100, "cached_input_tokens": 0, "cache_write_input_tokens": 0,
                              "output_tokens": 1, "reasoning_output_tokens": 0}
    assert second["usage"]["input_tokens"] == 300 and second["usage"]["output_tokens"] == 3  # the thread's total
    assert second["finalResponse"].startswith("command output was:")
    assert REFUSAL in result["failed"]  # turn.failed's message, thrown by run()
    assert authorizations == {"Bearer sdk-key"}
    assert model_requests and all(r["reasoning"]["effort"] == "low" for r in model_requests)



async def test_the_typescript_sdks_output_schema_reaches_the_model(tmp_path: Path) -> None:
    """``run(input, {outputSchema})``: the SDK writes the schema to a file and passes
    ``--output-schema FILE``; exec sends it as turn/start's outputSchema; the model's
    request carries it as the text format."""
    schema = {"type": "object", "properties": {"answer": {"type": "string"}}, "required": ["answer"],
              "additionalProperties": False}
    script = tmp_path / "schema.mjs"
    script.write_text(SCHEMA_DRIVER % {"sdk": json.dumps((ts_sdk() / "dist" / "index.js").as_uri())})
    node_binary = node()
    assert node_binary is not None
    async with model_server() as server:
        env = cli_env(TRIO_AGENT_HOME=str(tmp_path / "home"))
        cfg = {"bin": str(TRIO_AGENT), "env": env, "workspace": str(tmp_path), "baseUrl": server.http_base_url,
               "schema": schema}
        with trio.fail_after(SCRIPT_SECONDS):
            done = await trio.run_process([node_binary, str(script), json.dumps(cfg)], cwd=tmp_path, env=env,
                                          capture_stdout=True, capture_stderr=True, check=False,
                                          stdin=subprocess.DEVNULL)
        model_requests = [r for r in server.requests if r.get("generate") is not False]
    assert done.returncode == 0, done.stderr.decode()[-3000:]
    assert json.loads(done.stdout.decode().splitlines()[-1])["finalResponse"] == GREETING
    assert model_requests[-1]["text"]["format"]["schema"] == schema
