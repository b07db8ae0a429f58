"""Recording: secrets never reach the cassette, frames are written at boundaries (never
per frame), a cancelled agent leaves a whole cassette, and nothing of the recorder
exists when ``record`` is off."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import trio
import trio.testing

import trio_agent as ta
from trio_agent.testing import Cassette, FakeResponsesServer, frames

from ..conftest import EventLog, make_config, warm

API_KEY = "sk-test-SECRET-0123456789abcdef"
TOKEN = "chatgpt-SECRET-token-0123456789"
ACCOUNT = "acct-SECRET-42424242"


async def test_the_api_key_never_reaches_the_cassette_even_when_the_server_echoes_it(
    server: FakeResponsesServer, workspace: Path, tmp_path: Path
) -> None:
    path = tmp_path / "c.jsonl"

    async def script() -> None:
        conn = await warm(server)
        assert server.handshakes[0].headers["authorization"] == f"Bearer {API_KEY}"
        await conn.next_request()
        await conn.send_error(f"Incorrect API key provided: {API_KEY}", code="invalid_api_key")

    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(script)
            responses = ta.Responses(profile=ta.Profile.OPENAI, websocket_url=server.url, max_attempts=1)
            config = ta.AgentConfig(auth=API_KEY, workspace=workspace, record=path, session_id="model-test",
                                    thinking=ta.Thinking.LOW, responses=responses)
            async with ta.open_agent(config) as agent:
                turn = await agent.prompt("hello")
                try:
                    await turn.result()
                except ta.TurnFailed:
                    pass
    content = path.read_text()
    assert API_KEY not in content
    assert '"authorization":"<redacted>"' in content
    assert "Incorrect API key provided: <redacted>" in content
    Cassette.load(path)


class _Source:
    def validate(self) -> None:
        return None

    async def snapshot(self) -> ta.ChatGptAuthSnapshot:
        return ta.ChatGptAuthSnapshot(token=TOKEN, account_id=ACCOUNT)

    async def recover_unauthorized(self, rejected: ta.ChatGptAuthSnapshot) -> None:
        return None


async def test_chatgpt_tokens_and_account_ids_never_reach_the_cassette(
    server: FakeResponsesServer, workspace: Path, tmp_path: Path
) -> None:
    path = tmp_path / "c.jsonl"

    async def script() -> None:
        request = await server.accept_http()
        assert request.headers["authorization"] == f"Bearer {TOKEN}"
        assert request.headers["chatgpt-account-id"] == ACCOUNT
        await request.send_final("resp-1", f"you are {ACCOUNT} with token {TOKEN}")

    responses = ta.Responses(profile=ta.Profile.OPENAI, transport=ta.Transport.HTTPS, api_base_url=server.http_base_url)
    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(script)
            config = ta.AgentConfig(auth=ta.ChatGptAuth(_Source()), workspace=workspace, responses=responses,
                                    record=path)
            async with ta.open_agent(config) as agent:
                result = await (await agent.prompt("who am I")).result()
    assert TOKEN in result.final_message  # the agent saw it; the cassette does not
    content = path.read_text()
    assert TOKEN not in content and ACCOUNT not in content
    cassette = Cassette.load(path)
    (request,) = [o for o in cassette.observations if o.kind == "http.request"]
    headers = request.data["headers"]
    assert isinstance(headers, dict)
    assert headers["authorization"] == headers["chatgpt-account-id"] == "<redacted>"
    (end,) = cassette.turn_ends()
    assert end.data["final_message"] == "you are <redacted> with token <redacted>"


def _lines(path: Path) -> list[str]:
    return path.read_text().splitlines()


async def test_frames_are_written_at_boundaries_not_per_frame(
    server: FakeResponsesServer, workspace: Path, tmp_path: Path
) -> None:
    path = tmp_path / "c.jsonl"
    checked = trio.Event()

    async def script() -> None:
        conn = await warm(server)
        await conn.next_request()
        await trio.testing.wait_all_tasks_blocked()
        on_disk = _lines(path)
        # Sending the request was a boundary: the warmup's answer and the request are on disk.
        assert any("resp-warmup" in line and '"ws.recv"' in line for line in on_disk)
        assert '"ws.send"' in on_disk[-1]
        await conn.send(frames.response_created("resp-1"))
        await conn.send(frames.text_delta(0, "streaming"))
        await trio.testing.wait_all_tasks_blocked()
        assert _lines(path) == on_disk  # received frames wait in memory for the next boundary
        checked.set()
        await conn.send_final("resp-1", "done")

    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(script)
            async with ta.open_agent(make_config(server, workspace, record=path)) as agent:
                await (await agent.prompt("hello")).result()
    assert checked.is_set()
    content = path.read_text()
    assert "resp-1" in content and "streaming" in content  # the turn's end flushed them
    assert Cassette.load(path).complete


async def test_a_cancelled_agent_leaves_a_whole_cassette(
    server: FakeResponsesServer, workspace: Path, tmp_path: Path
) -> None:
    path = tmp_path / "c.jsonl"

    async def script() -> None:
        conn = await warm(server)
        await conn.next_request()
        await conn.send(frames.response_created("resp-1"))
        await trio.sleep_forever()

    log = EventLog()
    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(script)
            with trio.CancelScope() as scope:
                async with ta.open_agent(make_config(server, workspace, record=path)) as agent:
                    nursery.start_soon(log.consume, agent.events)
                    await agent.prompt("hello")
                    await log.wait_for(lambda e: e.kind is ta.EventKind.API_EVENT and "resp-1" in str(e.payload))
                    scope.cancel()
            nursery.cancel_scope.cancel()
    cassette = Cassette.load(path)  # whole lines, ending with the end line
    assert cassette.complete
    last, *ends = [(o.kind, o.data.get("status") or o.data.get("by")) for o in cassette.observations[-3:]]
    assert last == ("ws.recv", None)
    assert sorted(ends) == [("turn.end", "cancelled"), ("ws.close", "client")]


def test_nothing_of_the_recorder_is_imported_when_record_is_off() -> None:
    code = (
        "import sys, trio, trio_agent as ta\n"
        "assert not [m for m in sys.modules if m.startswith('trio_agent._cassette')], 'import trio_agent'\n"
        "from trio_agent.testing import FakeResponsesServer\n"
        "async def main():\n"
        "    server = FakeResponsesServer.in_memory()\n"
        "    async with trio.open_nursery() as n:\n"
        "        await n.start(server.serve)\n"
        "        async def model():\n"
        "            conn = await server.accept()\n"
        "            await conn.next_request(); await conn.send_warmup('w')\n"
        "            await conn.next_request(); await conn.send_final('r', 'ok')\n"
        "        n.start_soon(model)\n"
        "        cfg = ta.AgentConfig(auth='k', responses=ta.Responses(profile=ta.Profile.OPENAI, "
        "websocket_url=server.url, dialer=server.dial))\n"
        "        async with ta.open_agent(cfg) as agent:\n"
        "            assert (await (await agent.prompt('hi')).result()).final_message == 'ok'\n"
        "        n.cancel_scope.cancel()\n"
        "trio.run(main)\n"
        "print(sorted(m for m in sys.modules if m.startswith('trio_agent._cassette.recorder')))\n"
    )
    root = Path(ta.__file__).resolve().parent.parent
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=root,
                            check=False)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"


async def test_headers_of_the_users_own_http_client_are_recorded_redacted_by_name(
    server: FakeResponsesServer, workspace: Path, tmp_path: Path
) -> None:
    """Issue 29: an ``http_client`` with default headers -- they go out with every request
    and the cassette has them, a credential-named one as ``<redacted>``."""
    import httpx

    token = "team-token-0123456789"
    path = tmp_path / "client.jsonl"
    async with httpx.AsyncClient(headers={"X-Team": "blue", "X-Team-Token": token}) as client:
        responses = ta.Responses(profile=ta.Profile.OPENAI, transport=ta.Transport.HTTPS,
                                 api_base_url=server.http_base_url, http_client=client)
        config = ta.AgentConfig(auth="test-key", thinking=ta.Thinking.LOW, workspace=workspace,
                                responses=responses, record=path)

        async def model() -> None:
            request = await server.accept_http()
            assert (request.headers["x-team"], request.headers["x-team-token"]) == ("blue", token)
            await request.send_final("resp-1", "hi")

        with trio.fail_after(20):
            async with trio.open_nursery() as nursery:
                nursery.start_soon(model)
                async with ta.open_agent(config) as agent:
                    await (await agent.prompt("hello")).result()
    (request,) = [o for o in Cassette.load(path).observations if o.kind == "http.request"]
    headers = request.data["headers"]
    assert isinstance(headers, dict)
    assert headers["x-team"] == "blue" and headers["x-team-token"] == "<redacted>"
    assert headers["authorization"] == "<redacted>" and headers["content-type"] == "application/json"
    assert token not in path.read_text()
