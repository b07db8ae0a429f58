"""The head of the agent's HTTPS request (issue 30, item 4): the agent's own httpx client
builds its requests without ``build_request`` (the URL parsed and the headers merged
once per agent), and the head on the wire is still what ``build_request`` makes --
httpx's default headers, ours over them, the body's length -- and a cookie the server
set is sent back on the next request, as httpx's cookie jar does."""

from __future__ import annotations

from pathlib import Path

import httpx

import trio_agent as ta
from trio_agent.testing import FakeHttpRequest, FakeResponsesServer, frames

from ..conftest import make_config, scripted


async def test_the_request_head_is_httpx_s_and_a_server_cookie_comes_back(
    server: FakeResponsesServer, workspace: Path
) -> None:
    requests: list[FakeHttpRequest] = []

    async def script() -> None:
        for n, cookie in ((1, [("set-cookie", "affinity=node-7; Path=/")]), (2, []), (3, [])):
            request = await server.accept_http()
            requests.append(request)
            await request.start_stream(headers=cookie)
            await request.send_event(frames.completed(f"resp-{n}", [frames.assistant_message("hi")]))
            await request.finish()

    responses = ta.Responses(profile=ta.Profile.OPENAI, transport=ta.Transport.HTTPS, api_base_url=server.http_base_url)
    async with scripted(script), ta.open_agent(make_config(server, workspace, responses=responses)) as agent:
        for text in ("one", "two", "three"):
            assert (await (await agent.prompt(text)).result()).final_message == "hi"
    first, second, third = requests
    # What httpx's build_request puts in the head: its default headers and ours over them.
    defaults = {k.lower(): v for k, v in httpx.AsyncClient().headers.items()}
    for request in requests:
        assert request.method == "POST" and request.path.endswith("/responses")
        assert request.headers["content-length"] == str(len(request.raw_body))
        assert request.headers["content-type"] == "application/json"
        assert request.headers["accept"] == "text/event-stream"
        assert request.headers["authorization"] == "Bearer test-key"
        assert request.headers["host"] == server.http_base_url.split("//", 1)[1].split("/", 1)[0]
        for name in ("accept-encoding", "connection"):
            assert request.headers[name] == defaults[name]
        assert request.headers["user-agent"].startswith("trio-agent/")  # ours, over httpx's
    assert "cookie" not in first.headers
    assert second.headers["cookie"] == "affinity=node-7"  # the jar's, as build_request sends it
    assert third.headers["cookie"] == "affinity=node-7"
