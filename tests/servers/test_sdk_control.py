"""The positive control: the official ``openai`` SDK's streamed ``responses.create`` with a
function tool, through each server to the scripted chat backend. It proves the setup
(the server is up, bridges to Chat Completions, carries tools both ways) before any
failure is blamed on trio_agent."""

from __future__ import annotations

import json
import subprocess

import trio

from ._chat_backend import ChatBackend, call
from ._servers import API_KEY, MODEL, SDK_CONTROL, Server, litellm_python


async def test_the_sdk_gets_the_backends_function_call(responses_server: Server, backend: ChatBackend) -> None:
    backend.script(call("get_weather", {"city": "Paris"}))
    with trio.fail_after(90):
        done = await trio.run_process(
            [str(litellm_python()), "-c", SDK_CONTROL, responses_server.api_base, MODEL, API_KEY],
            capture_stdout=True, capture_stderr=True, check=False, stdin=subprocess.DEVNULL,
        )
    assert done.returncode == 0, (done.stderr.decode(errors="replace")[-3000:], responses_server.log_tail())
    result = json.loads(done.stdout)

    [request] = backend.requests
    assert request["model"] == MODEL
    [tool] = request["tools"]
    assert tool["type"] == "function"
    assert tool["function"]["name"] == "get_weather"
    assert tool["function"]["parameters"]["properties"] == {"city": {"type": "string"}}
    assert any("Paris" in json.dumps(message) for message in request["messages"] if message["role"] == "user"), request

    calls = [item for item in result["output"] or [] if item["type"] == "function_call"]
    assert [(c["name"], json.loads(c["arguments"])) for c in calls] == [("get_weather", {"city": "Paris"})], result
    assert "response.completed" in result["kinds"]
