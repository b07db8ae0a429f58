"""The pytest plugin (``pytest11`` entry point ``trio_agent``), run with ``pytester``:
the ``cassette`` fixture and marker, the four record modes, automatic cassette names,
``before_record`` and custom request matchers (issue 29)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

INNER = '''
import pytest
import trio_agent as ta
from trio_agent.testing import FakeResponsesServer

PROMPT = "say hello"

async def model(server, answers):
    for answer in answers:
        conn = await server.accept()
        await conn.next_request()
        await conn.send_warmup("resp-warmup")
        await conn.next_request()
        await conn.send_final("resp-1", answer)

def make(server, workspace):
    responses = ta.Responses(profile=ta.Profile.OPENAI, websocket_url=server.url)
    return ta.AgentConfig(auth="test-key", thinking=ta.Thinking.LOW, workspace=workspace, responses=responses,
                          session_id="plugin")

async def session(cassette, server, tmp_path, answer):
    async with cassette.use(make(server, tmp_path)) as config:
        async with ta.open_agent(config) as agent:
            assert (await (await agent.prompt(PROMPT)).result()).final_message == answer

async def test_hello(cassette, nursery, tmp_path):
    server = FakeResponsesServer()
    await nursery.start(server.serve)
    if cassette.recording:
        nursery.start_soon(model, server, ["hello"])
    await session(cassette, server, tmp_path, "hello")
'''

TWO_SESSIONS = '''
async def test_two(cassette, nursery, tmp_path):
    server = FakeResponsesServer()
    await nursery.start(server.serve)
    for index in (1, 2):
        if cassette.recording:
            nursery.start_soon(model, server, [f"answer {index}"])
        await session(cassette, server, tmp_path, f"answer {index}")
'''


@pytest.fixture
def inner(pytester: pytest.Pytester) -> pytest.Pytester:
    pytester.makeini("[pytest]\ntrio_mode = true\n")
    pytester.makepyfile(test_inner=INNER)
    return pytester


def _cassette(pytester: pytest.Pytester, name: str = "test_hello") -> Path:
    return pytester.path / "cassettes" / "test_inner" / f"{name}.jsonl"


def test_record_mode_none_is_the_default_and_never_records(inner: pytest.Pytester) -> None:
    result = inner.runpytest("-p", "no:cacheprovider")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*no cassette*test_hello.jsonl*--record-mode=once*"])
    assert not _cassette(inner).exists()


def test_once_records_a_test_without_a_cassette_and_then_replays_it(inner: pytest.Pytester) -> None:
    inner.runpytest("--record-mode=once").assert_outcomes(passed=1)
    path = _cassette(inner)  # the automatic name: cassettes/<module>/<test>.jsonl
    recorded = path.read_text()
    assert '"kind":"input.prompt"' in recorded and '"kind":"end"' in recorded
    inner.runpytest().assert_outcomes(passed=1)  # none: replays (no model script runs)
    inner.runpytest("--record-mode=once").assert_outcomes(passed=1)  # once, with a cassette: replays
    assert path.read_text() == recorded


def test_a_replay_that_differs_fails_the_test_with_the_diff(inner: pytest.Pytester) -> None:
    inner.runpytest("--record-mode=once").assert_outcomes(passed=1)
    inner.makepyfile(test_inner=INNER.replace('PROMPT = "say hello"', 'PROMPT = "say goodbye"'))
    result = inner.runpytest()
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*replay mismatch at cassette line*", '*-*"text": "say hello"*',
                                 '*+*"text": "say goodbye"*'])


def test_all_records_again(inner: pytest.Pytester) -> None:
    inner.runpytest("--record-mode=once").assert_outcomes(passed=1)
    first = json.loads(_cassette(inner).read_text().split("\n")[0])["created"]
    inner.runpytest("--record-mode=all").assert_outcomes(passed=1)
    assert json.loads(_cassette(inner).read_text().split("\n")[0])["created"] != first


def test_new_episodes_records_only_the_sessions_without_a_cassette(pytester: pytest.Pytester) -> None:
    pytester.makeini("[pytest]\ntrio_mode = true\n")
    pytester.makepyfile(test_inner=INNER + TWO_SESSIONS)
    pytester.runpytest("-k", "test_two", "--record-mode=once").assert_outcomes(passed=1)
    first, second = _cassette(pytester, "test_two"), _cassette(pytester, "test_two-2")
    kept = first.read_text()
    second.unlink()
    pytester.runpytest("-k", "test_two", "--record-mode=once").assert_outcomes(failed=1)  # once: no new sessions
    pytester.runpytest("-k", "test_two", "--record-mode=new_episodes").assert_outcomes(passed=1)
    assert first.read_text() == kept and second.exists()
    pytester.runpytest("-k", "test_two").assert_outcomes(passed=1)


def test_the_marker_names_the_cassette_and_sets_before_record_and_a_matcher(pytester: pytest.Pytester) -> None:
    pytester.makeini("[pytest]\ntrio_mode = true\n")
    marked = INNER.replace("async def test_hello(", '''
def scrub(observation):
    if observation["kind"] == "ws.open":
        observation["request_headers"]["user-agent"] = "<scrubbed>"
    return observation

def same_type(recorded, replayed):
    return recorded.get("type") == replayed.get("type")

@pytest.mark.cassette("greeting", before_record=scrub, match=same_type)
async def test_hello(''')
    pytester.makepyfile(test_inner=marked)
    pytester.runpytest("--record-mode=once").assert_outcomes(passed=1)
    path = _cassette(pytester, "greeting")
    opens = [json.loads(line) for line in path.read_text().splitlines() if '"ws.open"' in line]
    assert opens and all(o["request_headers"]["user-agent"] == "<scrubbed>" for o in opens)
    # The custom matcher compares only the type: a changed prompt still replays.
    pytester.makepyfile(test_inner=marked.replace('PROMPT = "say hello"', 'PROMPT = "say goodbye"'))
    pytester.runpytest().assert_outcomes(passed=1)
    strict = marked.replace('return recorded.get("type") == replayed.get("type")', "return recorded == replayed")
    pytester.makepyfile(test_inner=strict.replace('PROMPT = "say hello"', 'PROMPT = "say goodbye"'))
    result = pytester.runpytest()
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*differs from the recording by same_type*"])


def test_an_unknown_marker_option_is_a_usage_error(inner: pytest.Pytester) -> None:
    inner.makepyfile(test_inner=INNER.replace("async def test_hello(",
                                              "@pytest.mark.cassette(recordmode='all')\nasync def test_hello("))
    result = inner.runpytest()
    assert result.ret != 0
    result.stdout.fnmatch_lines(["*unknown cassette option(s) recordmode*"])


def test_loading_the_plugin_imports_no_trio_agent() -> None:
    """pytest loads the plugin in every session of a project with trio_agent installed."""
    import subprocess
    import sys

    code = ("import sys, pytest, _trio_agent_pytest; "
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('trio', 'trio_agent', 'httpx')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60)
    assert out.stdout.strip() == "[]"


def test_the_entry_point_names_the_plugin() -> None:
    from importlib.metadata import entry_points

    (plugin,) = [e for e in entry_points(group="pytest11") if e.name == "trio_agent"]
    assert plugin.value == "_trio_agent_pytest"
