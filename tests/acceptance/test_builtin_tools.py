"""The nested built-ins beyond the shell, through ``exec`` over real loopback:
``update_plan``, ``view_image``, ``web__run`` and ``image_gen__imagegen``. Each test
checks the requests on the wire and what the model is shown."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing

import trio_agent as ta
from trio_agent.testing import (
    PNG_PIXEL,
    FakeConnection,
    FakeResponsesServer,
    answer_image_request,
    answer_web_search,
)

from ..conftest import EventLog, make_config, memory_config, scripted, warm

PIXEL_URL = "data:image/png;base64," + base64.b64encode(PNG_PIXEL).decode()


async def _exec(conn: FakeConnection, response_id: str, call_id: str, source: str) -> Any:
    """Send one exec call; the output of the next request (the exec result)."""
    await conn.send_tool_call(response_id, call_id, "exec", source)
    request = await conn.next_request()
    return request["input"][0]["output"]


def _texts(output: Any) -> list[str]:
    assert isinstance(output, list), output
    return [part["text"] for part in output[1:] if part["type"] == "input_text"]


def _config(server: FakeResponsesServer, workspace: Path, **kw: Any) -> ta.AgentConfig:
    """A WebSocket agent whose remote tools POST to the same fake server."""
    responses = ta.Responses(profile=ta.Profile.OPENAI, websocket_url=server.url, api_base_url=server.http_base_url)
    return make_config(server, workspace, responses=responses, **kw)


# -- update_plan ---------------------------------------------------------------------------


async def test_update_plan_reports_the_plan_and_answers_plan_updated(
    server: FakeResponsesServer, workspace: Path
) -> None:
    source = (
        "const r = await tools.update_plan({explanation: 'starting', plan: [\n"
        "  {step: 'read the code', status: 'completed'}, {step: 'fix the bug', status: 'in_progress'}]});\n"
        "text(r);\n"
        "try { await tools.update_plan({plan: [{step: 'x', status: 'done'}]}); } catch (e) { text(e.message); }\n"
        "try { await tools.update_plan({}); } catch (e) { text(e.message); }"
    )

    async def script() -> None:
        conn = await warm(server)
        await conn.next_request()
        output = await _exec(conn, "resp-1", "call-1", source)
        assert _texts(output) == [
            "Plan updated",
            'invalid arguments for update_plan: plan[0].status: expected one of "pending", "in_progress", '
            '"completed", got "done"',
            "invalid arguments for update_plan: plan: required field is missing",
        ]
        await conn.send_final("resp-final")

    log = EventLog()
    async with scripted(script) as nursery, ta.open_agent(make_config(server, workspace)) as agent:
        nursery.start_soon(log.consume, agent.events)
        await (await agent.prompt("plan it")).result()
    (event,) = [e for e in log.events if e.kind is ta.EventKind.PLAN_UPDATED]
    assert event.payload == {
        "call_id": "call-1/code-1", "explanation": "starting",
        "plan": [{"step": "read the code", "status": "completed"}, {"step": "fix the bug", "status": "in_progress"}],
    }
    assert event.turn_id == 1
    statuses = [(p["call_id"], p["status"]) for p in log.payloads("tool.result") if p["tool"] == "update_plan"]
    assert statuses == [("call-1/code-1", "completed"), ("call-1/code-2", "failed"), ("call-1/code-3", "failed")]


# -- view_image ----------------------------------------------------------------------------


async def test_view_image_returns_an_input_image_that_image_shows(server: FakeResponsesServer, workspace: Path) -> None:
    (workspace / "shots").mkdir()
    (workspace / "shots" / "pixel.png").write_bytes(PNG_PIXEL)
    source = (
        "const img = await tools.view_image({path: 'shots/pixel.png'});\n"
        "text(JSON.stringify(Object.keys(img)));\n"
        "image(img);\n"
        "image(await tools.view_image({path: 'shots/pixel.png', detail: 'original'}));"
    )

    async def script() -> None:
        conn = await warm(server)
        await conn.next_request()
        output = await _exec(conn, "resp-1", "call-1", source)
        assert output[1:] == [
            {"type": "input_text", "text": '["type","image_url","detail"]'},
            {"type": "input_image", "image_url": PIXEL_URL},  # no detail on the wire (nanocodex)
            {"type": "input_image", "image_url": PIXEL_URL},
        ]
        await conn.send_final("resp-final")

    log = EventLog()
    async with scripted(script) as nursery, ta.open_agent(make_config(server, workspace)) as agent:
        nursery.start_soon(log.consume, agent.events)
        await (await agent.prompt("look")).result()
    (first, _) = [p for p in log.payloads("tool.result") if p["tool"] == "view_image"]
    assert first["status"] == "completed"
    assert json.loads(first["result"]) == {"type": "input_image", "image_url": PIXEL_URL, "detail": "high"}


async def test_view_image_refuses_what_it_must_not_read(server: FakeResponsesServer, workspace: Path) -> None:
    outside = workspace.parent / "secret.png"
    outside.write_bytes(PNG_PIXEL)
    (workspace / "escape.png").symlink_to(outside)
    (workspace / "notes.txt").write_text("not an image")
    with (workspace / "huge.png").open("wb") as huge:
        huge.write(PNG_PIXEL)
        huge.truncate(20 * 1024 * 1024 + 1)  # sparse: over the limit without writing 20 MiB
    (workspace / "dir.png").mkdir()
    cases = {
        "../secret.png": "is outside the workspace",
        str(outside): "is outside the workspace",
        "escape.png": "is outside the workspace",
        "notes.txt": "notes.txt is not a PNG, JPEG, GIF or WebP image",
        "huge.png": "huge.png is 20971521 bytes; images over 20971520 bytes (20 MiB) are refused",
        "missing.png": "no file at missing.png",
        "dir.png": "dir.png is not a regular file",
        "": "path must be a non-empty string",
    }
    source = "\n".join(
        f"try {{ await tools.view_image({{path: {json.dumps(path)}}}); text('read!'); }} "
        "catch (e) { text(e.message); }"
        for path in cases
    ) + "\ntry { await tools.view_image({path: 'notes.txt', detail: 'low'}); } catch (e) { text(e.message); }"

    async def script() -> None:
        conn = await warm(server)
        await conn.next_request()
        texts = _texts(await _exec(conn, "resp-1", "call-1", source))
        assert len(texts) == len(cases) + 1
        for text, expected in zip(texts, cases.values(), strict=False):
            assert text.startswith("view_image: ") and expected in text, (text, expected)
        assert texts[-1] == "view_image: detail must be \"high\" or \"original\", got 'low'"
        await conn.send_final("resp-final")

    async with scripted(script), ta.open_agent(make_config(server, workspace)) as agent:
        result = await (await agent.prompt("look")).result()
    assert result.final_message == "done"


# -- web__run --------------------------------------------------------------------------


async def test_web_search_posts_the_reference_body_with_the_model_auth(
    server: FakeResponsesServer, workspace: Path
) -> None:
    source = "text(await tools.web__run({search_query: [{q: 'trio nurseries', recency: 30}]}));"

    async def script() -> None:
        conn = await warm(server)
        await conn.next_request()
        await conn.send_final("resp-0", "Hi. " + "x" * 8000)  # long: only ~1,000 tokens go to the search
        await conn.next_request()
        await conn.send_completed("resp-1", [
            {"type": "message", "role": "assistant", "id": "msg-1", "phase": "commentary",
             "content": [{"type": "output_text", "text": "Let me search."}]},  # after the last prompt: left out
            {"type": "custom_tool_call", "id": "ctc-1", "call_id": "call-1", "name": "exec", "input": source},
        ])
        request = await answer_web_search(
            server, "Trio nurseries run child tasks. turn0search0", results=[{"ref_id": "turn0search0"}]
        )
        assert request.path == "/v1/alpha/search"
        assert request.headers["authorization"] == "Bearer test-key"
        assert request.headers["session-id"] == "model-test"
        assert request.headers["content-type"] == "application/json"
        answer = request.body["input"][1]["content"][0]["text"]
        assert answer.startswith("Hi. xxx") and "tokens truncated" in answer and len(answer) < 4100
        assert request.body == {
            "id": "model-test",
            "model": "gpt-5.5",
            "input": [
                {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "hello"}]},
                {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": answer}]},
                {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "what are nurseries"}]},
            ],
            "commands": {"search_query": [{"q": "trio nurseries", "recency": 30}]},
            "settings": {"allowed_callers": ["direct"], "external_web_access": True},
            "max_output_tokens": 10000,
        }
        output = (await conn.next_request())["input"][0]["output"]
        assert _texts(output) == ["Trio nurseries run child tasks. turn0search0"]
        await conn.send_final("resp-final")

    log = EventLog()
    async with scripted(script) as nursery, ta.open_agent(_config(server, workspace, model="gpt-5.5")) as agent:
        nursery.start_soon(log.consume, agent.events)
        await (await agent.prompt("hello")).result()
        await (await agent.prompt("what are nurseries")).result()
    (result,) = [p for p in log.payloads("tool.result") if p["tool"] == "web__run"]
    assert (result["call_id"], result["status"]) == ("call-1/code-1", "completed")


async def test_web_search_retries_a_server_error_once_and_fans_out_sports(
    server: FakeResponsesServer, workspace: Path
) -> None:
    source = (
        "text(await tools.web__run({time: [{utc_offset: '+01:00'}], response_length: 'short', sports: [\n"
        "  {fn: 'standings', league: 'nfl'}, {fn: 'schedule', league: 'nba', team: 'GSW'}]}));"
    )

    async def script() -> None:
        conn = await warm(server)
        await conn.next_request()
        await conn.send_tool_call("resp-1", "call-1", "exec", source)
        failed = await answer_web_search(server, "overloaded", status=503)
        first = await answer_web_search(server, "NFL standings")
        assert first.body == failed.body  # the same request, sent again
        assert first.body["commands"] == {
            "time": [{"utc_offset": "+01:00"}], "response_length": "short",
            "sports": [{"tool": "sports", "fn": "standings", "league": "nfl"}],
        }
        assert first.body["max_output_tokens"] == 5000
        second = await answer_web_search(server, "NBA schedule")
        assert second.body["commands"] == {
            "sports": [{"tool": "sports", "fn": "schedule", "league": "nba", "team": "GSW"}],
            "response_length": "short",
        }
        assert second.body["max_output_tokens"] == 5000
        output = (await conn.next_request())["input"][0]["output"]
        assert _texts(output) == ["NFL standings\nNBA schedule"]
        await conn.send_final("resp-final")

    async with scripted(script), ta.open_agent(_config(server, workspace)) as agent:
        await (await agent.prompt("sports")).result()


async def test_web_search_failures_are_failed_results(server: FakeResponsesServer, workspace: Path) -> None:
    queries = ", ".join(f"{{q: 'q{i}'}}" for i in range(5))
    source = (
        "for (const args of [{}, {search_query: [" + queries + "]}, {screenshot: [1]},\n"
        "    {search_query: [{q: 'a'}, {q: 'b'}, {q: 'c'}, {q: 'd'}]}, {search_query: [{q: 'refused'}]}]) {\n"
        "  try { await tools.web__run(args); text('ok'); } catch (e) { text(e.message); }\n"
        "}"
    )

    async def script() -> None:
        conn = await warm(server)
        await conn.next_request()
        await conn.send_tool_call("resp-1", "call-1", "exec", source)
        refused = await answer_web_search(server, "bad request", status=400)  # a 4xx is not retried
        assert refused.body["commands"] == {"search_query": [{"q": "refused"}]}
        texts = _texts((await conn.next_request())["input"][0]["output"])
        assert texts == [
            'web__run requires at least one command, e.g. {search_query: [{q: "..."}]}',
            "web__run accepts at most 4 search queries per call; got 5",
            "invalid arguments for web__run: screenshot: unexpected field (the fields are: search_query, "
            "image_query, open, click, find, finance, weather, sports, time, response_length)",
            "web__run needs response_length medium or long when sending 4 search queries",
            'web search returned HTTP 400: {"error":{"message":"bad request"}}',
        ]
        await conn.send_final("resp-final")

    async with scripted(script), ta.open_agent(_config(server, workspace)) as agent:
        await (await agent.prompt("search")).result()


async def test_web_search_gives_up_after_45_seconds_and_retries_a_dropped_connection(
    memory_server: FakeResponsesServer, workspace: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """Under MockClock, on the in-memory seam: exact virtual times."""
    source = (
        '// @exec: {"yield_time_ms": 120000}\n'
        "const t0 = Date.now();\n"
        "try { await tools.web__run({search_query: [{q: 'hang'}]}); } catch (e) { text(e.message); }\n"
        "text(await tools.web__run({search_query: [{q: 'flaky'}]}));"
    )
    seen: dict[str, float] = {}

    async def script() -> None:
        conn = await warm(memory_server)
        await conn.next_request()
        await conn.send_tool_call("resp-1", "call-1", "exec", source)
        hung = await memory_server.accept_http()  # never answered
        seen["hung"] = trio.current_time()
        assert hung.body["commands"] == {"search_query": [{"q": "hang"}]}
        dropped = await memory_server.accept_http()
        seen["second"] = trio.current_time()
        assert dropped.body["commands"] == {"search_query": [{"q": "flaky"}]}
        await dropped.drop()
        retried = await answer_web_search(memory_server, "found it")
        seen["retry"] = trio.current_time()
        assert retried.body == dropped.body
        texts = _texts((await conn.next_request())["input"][0]["output"])
        assert texts == ["web search timed out after 45 seconds", "found it"]
        await conn.send_final("resp-final")

    responses = ta.Responses(
        profile=ta.Profile.OPENAI,
        websocket_url=memory_server.url, api_base_url=memory_server.http_base_url, dialer=memory_server.dial
    )
    async with scripted(script, 100), ta.open_agent(memory_config(memory_server, workspace, responses=responses)) as a:
        await (await a.prompt("search")).result()
    assert seen["second"] - seen["hung"] == pytest.approx(45.0)
    assert seen["retry"] - seen["second"] == pytest.approx(0.2)


async def test_web_search_can_be_turned_off(server: FakeResponsesServer, workspace: Path) -> None:
    async def script() -> None:
        conn = await server.accept()
        warmup = await conn.next_request()
        assert "turned off for this agent" in warmup["input"][0]["tools"][0]["description"]
        await conn.send_warmup("resp-warmup")
        await conn.next_request()
        source = "try { await tools.web__run({}); } catch (e) { text(e.message); }"
        output = await _exec(conn, "resp-1", "call-1", source)
        assert _texts(output) == ["unsupported nested tool call: web__run"]
        await conn.send_final("resp-final")

    tools = ta.Tools.default().without_web_search()
    async with scripted(script), ta.open_agent(_config(server, workspace, tools=tools)) as agent:
        await (await agent.prompt("search")).result()


# -- image_gen__imagegen -------------------------------------------------------------------


async def test_image_generation_posts_generations_and_edits(server: FakeResponsesServer, workspace: Path) -> None:
    (workspace / "logo.png").write_bytes(PNG_PIXEL)
    generated = PNG_PIXEL + b"generated"  # any bytes: the tool returns what the API sends
    generated_url = "data:image/png;base64," + base64.b64encode(generated).decode()
    source = (
        "const a = await tools.image_gen__imagegen({prompt: 'a red fox'});\n"
        "image(a);\n"
        "const b = await tools.image_gen__imagegen({prompt: 'make it blue', referenced_image_paths: ['logo.png']});\n"
        "text(b.type);\n"
        "const c = await tools.image_gen__imagegen({prompt: 'again', num_last_images_to_include: 1});\n"
        "text(c.image_url.length > 0);\n"
        "for (const bad of [{prompt: 'x', num_last_images_to_include: 2}, {}, {prompt: 'x', referenced_image_paths:"
        " ['../out.png']}]) {\n"
        "  try { await tools.image_gen__imagegen(bad); } catch (e) { text(e.message); }\n"
        "}"
    )

    async def script() -> None:
        conn = await warm(server)
        await conn.next_request()
        await conn.send_tool_call("resp-1", "call-1", "exec", source)
        first = await answer_image_request(server, generated)
        assert first.path == "/v1/images/generations"
        assert first.headers["authorization"] == "Bearer test-key"
        assert first.body == {"prompt": "a red fox", "background": "auto", "model": "gpt-image-2",
                              "quality": "auto", "size": "auto"}
        edit = await answer_image_request(server)
        assert edit.path == "/v1/images/edits"
        assert edit.body == {"images": [{"image_url": PIXEL_URL}], "prompt": "make it blue", "background": "auto",
                             "model": "gpt-image-2", "quality": "auto", "size": "auto"}
        from_history = await answer_image_request(server)
        assert from_history.body["images"] == [{"image_url": "data:image/png;base64,cHJpb3I="}]
        output = (await conn.next_request())["input"][0]["output"]
        assert output[1] == {"type": "input_image", "image_url": generated_url}  # no detail on the wire (nanocodex)
        saved = workspace.resolve() / "generated_images" / session / "call-1_code-1.png"
        assert output[2]["text"].startswith(f"The generated image was saved to {saved} (generated images go to ")
        assert _texts(output)[1:] == [
            "input_image",
            "true",
            "image_gen__imagegen: asked for the last 2 images, but the conversation has 1",
            "invalid arguments for image_gen__imagegen: prompt: required field is missing",
            "image_gen__imagegen: ../out.png is outside the workspace"
            f" ({workspace.resolve()}); pass a path inside it",
        ]
        await conn.send_final("resp-final")

    prompt = ta.Prompt("draw", images=["data:image/png;base64,cHJpb3I="])
    tools = ta.Tools.default().with_image_generation()
    config = _config(server, workspace, tools=tools)
    session = config.session_id
    async with scripted(script), ta.open_agent(config) as agent:
        await (await agent.prompt(prompt)).result()
    # Each generated image is saved under the workspace, by session and call (nanocodex's layout).
    folder = workspace / "generated_images" / session
    assert sorted(p.name for p in folder.iterdir()) == ["call-1_code-1.png", "call-1_code-2.png", "call-1_code-3.png"]
    assert (folder / "call-1_code-1.png").read_bytes() == generated

