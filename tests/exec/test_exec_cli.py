"""``trio-agent exec`` as the TypeScript SDK runs it: a real subprocess per turn, the
prompt on stdin, the fake model on loopback (or the built-in local model), threads in
a home shared by every process and by ``trio-agent serve``."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
import trio
import trio.testing

import trio_agent as ta
from trio_agent._serve import open_app_server
from trio_agent.testing import AppServerClient, LineChannel

from .._shell_line import is_shell_line
from ..cli._cli import COMMAND
from ..serve._live import serve_subprocess
from ..serve._schema import validate_server_message
from ._exec import completed_items, events, exec_env, model_server, run_exec
from ._exec_schema import check_event
from ._fake_model import GREETING, REFUSAL, prompt_of

SDK_ARGS = ("--experimental-json", "--model", "gpt-5.5", "--sandbox", "danger-full-access", "--skip-git-repo-check")


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    path = tmp_path / "project"
    path.mkdir()
    return path


def checked(stdout: bytes) -> list[dict[str, object]]:
    evts = events(stdout)
    for event in evts:
        check_event(event)
    return evts


async def test_a_turn_then_a_command_turn_resumed_in_a_new_process(tmp_path: Path, workspace: Path) -> None:
    """ts-sdk_real-codex-0.171.0.jsonl: turn "hello", then ``resume ID`` with a shell command."""
    home = tmp_path / "home"
    async with model_server() as server:
        env = exec_env(home, server)
        first = await run_exec(*SDK_ARGS, "--cd", str(workspace), cwd=tmp_path, env=env, stdin=b"hello")
        one = checked(first.stdout)
        thread_id = one[0]["thread_id"]
        second = await run_exec(*SDK_ARGS, "--cd", str(workspace), "resume", str(thread_id), cwd=tmp_path, env=env,
                                stdin=b"run: echo hi-from-shell")
        two = checked(second.stdout)
    assert first.returncode == 0 and second.returncode == 0, (first.stderr, second.stderr)
    assert "Reading prompt from stdin..." in first.stderr.decode()
    assert [e["type"] for e in one] == ["thread.started", "turn.started", "item.completed", "turn.completed"]
    assert one[2]["item"] == {"id": "item_0", "type": "agent_message", "text": GREETING}
    assert one[3]["usage"] == {"input_tokens": 100, "cached_input_tokens": 0, "cache_write_input_tokens": 0,
                               "output_tokens": 1, "reasoning_output_tokens": 0}
    assert two[0] == {"type": "thread.started", "thread_id": thread_id}
    shell = [item for item in completed_items(two, "command_execution")
             if is_shell_line(item["command"], "echo hi-from-shell")]
    assert len(shell) == 1 and shell[0]["aggregated_output"] == "hi-from-shell\n" and shell[0]["exit_code"] == 0
    assert shell[0]["status"] == "completed"
    started = [e["item"] for e in two if e["type"] == "item.started"]
    assert {"id": shell[0]["id"], "type": "command_execution", "command": shell[0]["command"],
            "aggregated_output": "", "exit_code": None, "status": "in_progress"} in started
    answer = completed_items(two, "agent_message")
    assert len(answer) == 1 and answer[0]["text"].startswith("command output was:")
    assert "hi-from-shell" in answer[0]["text"]
    assert two[-1]["type"] == "turn.completed" and two[-1]["usage"]["input_tokens"] == 300  # the thread's total


async def test_a_failed_turn_prints_error_and_turn_failed_and_exits_1(tmp_path: Path, workspace: Path) -> None:
    """ts-sdk_real-codex_failed-turn.jsonl: the provider refuses the request."""
    async with model_server() as server:
        result = await run_exec(*SDK_ARGS, "--cd", str(workspace), cwd=tmp_path, env=exec_env(tmp_path / "h", server),
                                stdin=b"refuse this")
    evts = checked(result.stdout)
    assert result.returncode == 1
    assert [e["type"] for e in evts] == ["thread.started", "turn.started", "error", "turn.failed"]
    assert REFUSAL in evts[2]["message"] and evts[3]["error"] == {"message": evts[2]["message"]}


async def test_a_prompt_argument_gets_piped_stdin_appended(tmp_path: Path, workspace: Path) -> None:
    async with model_server() as server:
        result = await run_exec("--json", "--cd", str(workspace), "say hello", cwd=tmp_path,
                                env=exec_env(tmp_path / "h", server), stdin=b"extra context\n")
        prompts = [prompt_of(r) for r in server.requests if r.get("generate") is not False]
    assert result.returncode == 0
    assert prompts == ["say hello\n\n<stdin>\nextra context\n</stdin>"]


async def test_without_a_key_the_local_model_answers_and_says_so_on_stderr(tmp_path: Path, workspace: Path) -> None:
    result = await run_exec("--json", "hello there", cwd=workspace, env=exec_env(tmp_path / "h"))
    evts = checked(result.stdout)
    assert result.returncode == 0
    assert "built-in local scripted model" in result.stderr.decode()
    assert "local" not in result.stdout.decode().split("agent_message")[0]  # the notice is not an event
    assert "hello there" in completed_items(evts, "agent_message")[0]["text"]


@pytest.mark.parametrize(("keys", "expected"), [
    ({"CODEX_API_KEY": "codex-key", "OPENAI_API_KEY": "openai-key"}, "Bearer codex-key"),
    ({"OPENAI_API_KEY": "openai-key"}, "Bearer openai-key"),  # control: without CODEX_API_KEY, the usual key
])
async def test_codex_api_key_is_the_models_key(tmp_path: Path, workspace: Path, keys: dict[str, str],
                                               expected: str) -> None:
    async with model_server() as server:
        env = {**exec_env(tmp_path / "h", server), **keys}
        result = await run_exec("--json", "hello", cwd=workspace, env=env)
        authorizations = {handshake.headers.get("authorization") for handshake in server.handshakes}
    assert result.returncode == 0
    assert authorizations == {expected}


async def test_without_json_stdout_is_the_answer_alone(tmp_path: Path, workspace: Path) -> None:
    async with model_server() as server:
        result = await run_exec("hello", cwd=workspace, env=exec_env(tmp_path / "h", server))
    assert result.returncode == 0
    assert result.stdout.decode() == GREETING + "\n"
    assert "thread " in result.stderr.decode()


async def test_output_last_message_writes_the_answer(tmp_path: Path, workspace: Path) -> None:
    target = tmp_path / "answer.txt"
    async with model_server() as server:
        result = await run_exec("--json", "-o", str(target), "hello", cwd=workspace,
                                env=exec_env(tmp_path / "h", server))
    assert result.returncode == 0 and target.read_text() == GREETING


@pytest.mark.parametrize(("args", "said"), [
    (["resume"], "resume needs the THREAD_ID"),
    (["--cd", "/nonexistent/dir", "hi"], "is not an existing directory"),
    (["--add-dir", "/nonexistent/dir", "hi"], "is not an existing directory"),
    (["two", "words"], "give the prompt as one argument"),
    (["--output-schema", "/nonexistent/schema.json", "hi"], "cannot read it"),
    (["--last", "hi"], "go with resume"),
    (["--sandbox", "everything", "hi"], "invalid choice"),
])
async def test_bad_command_lines_exit_2_saying_why(tmp_path: Path, args: list[str], said: str) -> None:
    result = await run_exec("--json", *args, cwd=tmp_path, env=exec_env(tmp_path / "h"))
    assert result.returncode == 2 and result.stdout == b""
    assert said in result.stderr.decode()


async def test_an_empty_stdin_is_no_prompt(tmp_path: Path) -> None:
    result = await run_exec("--json", cwd=tmp_path, env=exec_env(tmp_path / "h"), stdin=b"  \n")
    assert result.returncode == 2 and result.stdout == b"" and "stdin was empty" in result.stderr.decode()


async def test_a_schema_file_that_is_not_json_exits_2(tmp_path: Path) -> None:
    schema = tmp_path / "schema.json"
    schema.write_text("{not json")
    result = await run_exec("--json", "--output-schema", str(schema), "hi", cwd=tmp_path, env=exec_env(tmp_path / "h"))
    assert result.returncode == 2 and "is not valid JSON" in result.stderr.decode()


async def test_output_schema_reaches_the_model_as_the_text_format(tmp_path: Path, workspace: Path) -> None:
    schema = {"type": "object", "properties": {"answer": {"type": "string"}}, "required": ["answer"],
              "additionalProperties": False}
    schema_file = tmp_path / "schema.json"
    schema_file.write_text(json.dumps(schema))
    async with model_server() as server:
        result = await run_exec("--json", "--output-schema", str(schema_file), "hello", cwd=workspace,
                                env=exec_env(tmp_path / "h", server))
        model_requests = [r for r in server.requests if r.get("generate") is not False]
    assert result.returncode == 0, result.stderr
    assert model_requests and model_requests[-1]["text"]["format"]["schema"] == schema


async def test_serve_resumes_a_thread_exec_started_and_exec_one_serve_started(tmp_path: Path,
                                                                            workspace: Path) -> None:
    """One home, one thread store: ``exec`` and ``serve`` continue each other's threads."""
    home = tmp_path / "home"
    async with model_server() as server:
        env = exec_env(home, server)
        made = checked((await run_exec("--json", "--cd", str(workspace), "hello", cwd=tmp_path, env=env)).stdout)
        exec_thread = made[0]["thread_id"]
        command = [*COMMAND, "serve", "--home", str(home)]
        async with serve_subprocess(command, cwd=workspace, env=env) as (_process, client):
            await client.initialize()
            resumed = await client.request("thread/resume", {"threadId": exec_thread})
            assert resumed["thread"]["id"] == exec_thread and len(resumed["thread"]["turns"]) == 1
            started = await client.request("thread/start", {"cwd": str(workspace)})
            serve_thread = started["thread"]["id"]
            turn = await client.request("turn/start", {"threadId": serve_thread,
                                                       "input": [{"type": "text", "text": "hello"}]})
            await client.read_notification("turn/completed", lambda p: p["turn"]["id"] == turn["turn"]["id"])
        back = await run_exec("--json", "resume", serve_thread, "hello", cwd=workspace, env=env)
    evts = checked(back.stdout)
    assert back.returncode == 0 and evts[0] == {"type": "thread.started", "thread_id": serve_thread}
    assert evts[-1]["type"] == "turn.completed" and evts[-1]["usage"]["input_tokens"] == 200


async def test_a_thread_of_an_in_process_server_is_resumed_by_exec(tmp_path: Path, workspace: Path) -> None:
    """The library's ``open_app_server`` on a home, then ``exec resume`` in a new process."""
    home = tmp_path / "home"
    async with model_server() as server:
        config = ta.AgentConfig(auth="test-key", workspace=workspace, responses=ta.Responses(
            profile=ta.Profile.OPENAI,
            websocket_url=server.url))
        async with open_app_server(config, home=home) as app, trio.open_nursery() as nursery:
            client_stream, server_stream = trio.testing.memory_stream_pair()
            nursery.start_soon(app.serve_connection, LineChannel(server_stream))
            client = AppServerClient(LineChannel(client_stream), validate=validate_server_message)
            await client.initialize()
            thread = (await client.request("thread/start", {"cwd": str(workspace)}))["thread"]["id"]
            await client.request("turn/start", {"threadId": thread, "input": [{"type": "text", "text": "hello"}]})
            await client.read_notification("turn/completed")
            # While that server has the thread loaded, its rollout has one writer: exec says so.
            busy = await run_exec("--json", "resume", thread, "hello", cwd=workspace, env=exec_env(home, server))
            await client_stream.aclose()
        result = await run_exec("--json", "resume", thread, "hello", cwd=workspace, env=exec_env(home, server))
    (refusal,) = checked(busy.stdout)
    assert busy.returncode == 1 and refusal["type"] == "error"
    assert refusal["message"].startswith("thread/resume: the rollout") and "locked by another live writer" in refusal[
        "message"]
    evts = checked(result.stdout)
    assert result.returncode == 0 and evts[0]["thread_id"] == thread
    assert evts[-1]["usage"]["input_tokens"] == 200  # the first turn was kept: nothing lost to the refused resume


async def test_images_given_after_resume_are_sent_before_the_prompt(tmp_path: Path, workspace: Path) -> None:
    """The SDK puts ``--image`` after ``resume ID``; both spellings (repeated, and FILE,FILE)."""
    first, second = tmp_path / "a.png", tmp_path / "b.png"
    for image in (first, second):
        image.write_bytes(bytes.fromhex("89504e470d0a1a0a"))
    async with model_server() as server:
        env = exec_env(tmp_path / "h", server)
        made = checked((await run_exec("--json", "hello", cwd=workspace, env=env)).stdout)
        result = await run_exec("--json", "resume", str(made[0]["thread_id"]), "--image", f"{first},{second}",
                                "--image", str(first), cwd=workspace, env=env, stdin=b"look")
        model_requests = [r for r in server.requests if r.get("generate") is not False]
    assert result.returncode == 0, result.stderr
    (user,) = [item for item in model_requests[-1]["input"] if item.get("role") == "user"
               and any(part.get("type") == "input_image" for part in item.get("content", []))]
    images = [part for part in user["content"] if part.get("type") == "input_image"]
    assert len(images) == 3 and all(part["image_url"].startswith("data:image/png;base64,") for part in images)
    assert prompt_of(model_requests[-1]) == "look"


async def test_add_dir_is_writable_under_workspace_write_and_its_sibling_is_not(tmp_path: Path,
                                                                                 workspace: Path) -> None:
    """``--add-dir`` widens workspace-write by that directory only (positive control: the
    same write into the added directory succeeds)."""
    from trio_agent._tools._sandbox import resolve_sandbox

    if resolve_sandbox(None).fallback is not None:
        pytest.fail("Bubblewrap does not work on this machine; this test needs the sandbox (CI has it)")
    extra, sibling = tmp_path / "extra", tmp_path / "sibling"
    extra.mkdir()
    sibling.mkdir()
    async with model_server() as server:
        env = exec_env(tmp_path / "h", server)
        allowed = await run_exec("--json", "--sandbox", "workspace-write", "--add-dir", str(extra),
                                 f"run: touch {extra}/made", cwd=workspace, env=env)
        refused = await run_exec("--json", "--sandbox", "workspace-write", "--add-dir", str(extra),
                                 f"run: touch {sibling}/made", cwd=workspace, env=env)
        without = await run_exec("--json", "--sandbox", "workspace-write", f"run: touch {extra}/made-without",
                                 cwd=workspace, env=env)
    assert allowed.returncode == refused.returncode == without.returncode == 0
    assert (extra / "made").exists()
    assert not (sibling / "made").exists() and not (extra / "made-without").exists()
    (denied,) = [item for item in completed_items(checked(refused.stdout), "command_execution")
                 if is_shell_line(item["command"], f"touch {sibling}/made")]
    assert denied["exit_code"] != 0 and denied["status"] == "failed"  # (under /tmp: hidden, or read-only elsewhere)


async def test_a_closed_stdout_ends_the_run_without_a_traceback(tmp_path: Path, workspace: Path) -> None:
    """The reader went away before the first event: exit 1, one line saying so, and the
    thread's record is still written (the turn was cancelled, not lost)."""
    read_end, write_end = os.pipe()
    os.close(read_end)  # nobody will ever read
    try:
        with trio.fail_after(60):
            done = await trio.run_process([*COMMAND, "exec", "--json", "hello"], cwd=workspace,
                                          env=exec_env(tmp_path / "home"), stdin=subprocess.DEVNULL,
                                          stdout=write_end, capture_stderr=True, check=False)
    finally:
        os.close(write_end)
    stderr = done.stderr.decode()
    assert done.returncode == 1, stderr
    assert "stdout was closed" in stderr and "Traceback" not in stderr
    assert list((tmp_path / "home" / "app-server" / "threads").iterdir())  # the thread was recorded


@pytest.mark.parametrize(("overrides", "has_web_search"), [
    ((), True), (("-c", 'web_search="live"'), True), (("-c", 'web_search="disabled"'), False),
    (("-c", 'web_search="cached"'), False),
], ids=["default", "live", "disabled", "cached"])
async def test_web_search_follows_the_codex_key(tmp_path: Path, workspace: Path, overrides: tuple[str, ...],
                                                has_web_search: bool) -> None:
    # The TypeScript SDK sends -c web_search="disabled" for webSearchEnabled: false; codex's
    # "cached" needs an index trio-agent lacks, so that thread has no search tool either.
    async with model_server() as server:
        done = await run_exec(*SDK_ARGS, *overrides, "--cd", str(workspace), cwd=tmp_path,
                              env=exec_env(tmp_path / "home", server), stdin=b"hello")
        tools = json.dumps(server.requests[0])  # the warmup carries the tools; the turn chains on it
    assert done.returncode == 0, done.stderr
    assert ("tools.web__run" in tools) is has_web_search and "tools.exec_command" in tools
    assert ("web_search" in done.stderr.decode()) is (overrides[-1:] == ('web_search="cached"',))


async def test_the_local_model_answers_an_output_schema_with_an_instance_of_it(tmp_path: Path, workspace: Path) -> None:
    # No key: the built-in local model. Its final answers honour text.format, so the
    # --output-schema path prints JSON as it does with a real model.
    import jsonschema

    schema = {"type": "object", "additionalProperties": False, "required": ["answer", "count", "tags", "mode"],
              "properties": {"answer": {"type": "string"}, "count": {"type": "integer"},
                             "tags": {"type": "array", "items": {"type": "string"}}, "mode": {"enum": ["a", "b"]}}}
    (tmp_path / "schema.json").write_text(json.dumps(schema))
    for prompt in (b"hello", b"run: echo shaped"):
        done = await run_exec("--json", "--output-schema", str(tmp_path / "schema.json"), "--cd", str(workspace),
                              cwd=tmp_path, env=exec_env(tmp_path / "home"), stdin=prompt)
        assert done.returncode == 0, done.stderr
        (message,) = completed_items(checked(done.stdout), "agent_message")
        jsonschema.validate(json.loads(str(message["text"])), schema)
    plain = await run_exec("--json", "--cd", str(workspace), cwd=tmp_path, env=exec_env(tmp_path / "home"),
                           stdin=b"hello")
    (message,) = completed_items(checked(plain.stdout), "agent_message")
    assert str(message["text"]).startswith("Hello from trio_agent's local scripted model")  # no schema: prose
