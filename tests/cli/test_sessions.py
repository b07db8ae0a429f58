"""Sessions like codex's (issue 24, item 2), through the installed console script:
``run`` keeps its session in ``$TRIO_AGENT_HOME`` (a directory of the test) and names it
on stderr, ``--ephemeral`` keeps none, ``resume --last`` / ``resume ID`` continue one
-- ours or a codex rollout (``$CODEX_HOME``) -- with the history sent exactly once, in
the recorded directory or, when it is gone, the current one with one notice; and every
way of naming no session is one line, exit 2. The model is a loopback
``FakeResponsesServer`` over HTTPS (``--api-base``, ``OPENAI_API_KEY=sk-test``), or the
built-in local one."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from trio_agent.testing import FakeResponsesServer

from ._console import refused, script
from ._sessions import (
    FIXTURES,
    HINT,
    NATIVE_ID,
    file_lines,
    hinted,
    install_native,
    session_files,
    texts,
    turn,
    user_env,
)


async def test_run_keeps_its_session_in_the_home_and_stderr_says_how_to_resume_it(
    server: FakeResponsesServer, tmp_path: Path
) -> None:
    ran, _ = await turn(server, tmp_path, "run", "FIRST-PROMPT")
    assert ran.code == 0, ran.err
    assert ran.out.splitlines()[0] == "THE-ANSWER" and HINT not in ran.out
    (path,) = session_files(tmp_path / "home")
    session = hinted(ran)
    assert path.name.endswith(f"-{session}.jsonl")
    meta = file_lines(path)[0]["payload"]
    assert (meta["id"], meta["cwd"]) == (session, str(tmp_path))
    assert "FIRST-PROMPT" in path.read_text() and "THE-ANSWER" in path.read_text()


async def test_ephemeral_keeps_no_session(server: FakeResponsesServer, tmp_path: Path) -> None:
    ran, _ = await turn(server, tmp_path, "run", "--ephemeral", "hi")
    assert ran.code == 0, ran.err
    assert not (tmp_path / "home").exists() and HINT not in ran.err + ran.out


async def test_resume_last_sends_the_previous_turn_exactly_once(server: FakeResponsesServer, tmp_path: Path) -> None:
    first, _ = await turn(server, tmp_path, "run", "FIRST-PROMPT", reply="FIRST-ANSWER")
    session = hinted(first)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    ran, request = await turn(server, tmp_path, "resume", "--last", "NEXT-PROMPT", reply="NEXT-ANSWER", cwd=elsewhere)
    assert ran.code == 0, ran.err
    assert ran.out.splitlines()[0] == "NEXT-ANSWER" and hinted(ran) == session
    assert "does not exist" not in ran.err  # the recorded directory is there: the session runs in it
    sent = texts(request.body)
    assert [sent.count(text) for text in ("FIRST-PROMPT", "FIRST-ANSWER", "NEXT-PROMPT")] == [1, 1, 1]
    assert sent[-1] == "NEXT-PROMPT" and request.body["prompt_cache_key"] == session
    assert sum("<environment_context>" in text for text in sent) == 1  # the context of the first turn, once
    assert f"<cwd>{tmp_path}</cwd>" in json.dumps(request.body)
    (path,) = session_files(tmp_path / "home")  # the same file grew
    written = path.read_text()
    assert [written.count(text) for text in ("FIRST-PROMPT", "NEXT-PROMPT", '"type":"session_meta"')] == [2, 2, 1]


async def test_resume_by_id_and_with_jsonl(server: FakeResponsesServer, tmp_path: Path) -> None:
    session = hinted((await turn(server, tmp_path, "run", "FIRST-PROMPT"))[0])
    ran, request = await turn(server, tmp_path, "resume", "--json", session, "NEXT-PROMPT")
    assert ran.code == 0, ran.err
    assert ran.events()[-1]["type"] and hinted(ran) == session  # stdout: JSON lines only
    assert texts(request.body).count("FIRST-PROMPT") == 1


@pytest.mark.parametrize("cd", [False, True])
async def test_a_codex_session_resumes_with_its_instructions_in_a_directory_that_exists(
    server: FakeResponsesServer, tmp_path: Path, cd: bool
) -> None:
    path = install_native(tmp_path / "codex-home")
    before = file_lines(path)
    here = tmp_path / "here"
    here.mkdir()
    args = ("resume", *(("-C", str(here)) if cd else ()), NATIVE_ID, "NEXT-PROMPT")
    ran, request = await turn(server, tmp_path, *args, cwd=here if not cd else tmp_path)
    assert ran.code == 0, ran.err
    assert hinted(ran) == NATIVE_ID and ran.out.splitlines()[0] == "THE-ANSWER"
    notice = f"trio-agent: the session's directory {before[0]['payload']['cwd']} does not exist; resuming in {here}"
    assert (notice in ran.err) is not cd and ran.err.count("does not exist") == (0 if cd else 1)
    body = request.body
    assert body["input"][1]["content"][0]["text"] == before[0]["payload"]["base_instructions"]["text"]
    assert texts(body).count("run echo hello-from-tool") == 1 and texts(body)[-1] == "NEXT-PROMPT"
    assert f"<cwd>{here}</cwd>" in json.dumps(body)
    after = file_lines(path)
    assert after[: len(before)] == before
    assert [line["ordinal"] for line in after] == list(range(len(after)))  # codex's numbering, continued
    assert not (tmp_path / "home").exists()  # continued in codex's file, not copied into ours


async def test_resume_by_the_path_of_a_rollout_file(server: FakeResponsesServer, tmp_path: Path) -> None:
    path = install_native(tmp_path / "elsewhere-home")  # not $CODEX_HOME: the path says where
    ran, request = await turn(server, tmp_path, "resume", str(path), "NEXT-PROMPT")
    assert ran.code == 0, ran.err
    assert hinted(ran) == NATIVE_ID and texts(request.body).count("run echo hello-from-tool") == 1


async def test_the_local_model_resumes_too(tmp_path: Path) -> None:
    env = user_env(tmp_path)
    first = await script("run", "--local", "FIRST-PROMPT", cwd=tmp_path, env=env)
    assert first.code == 0, first.err
    ran = await script("resume", "--local", "--last", "NEXT-PROMPT", cwd=tmp_path, env=env)
    assert ran.code == 0, ran.err
    assert "You said: 'NEXT-PROMPT'" in ran.out and hinted(ran) == hinted(first)
    (path,) = session_files(tmp_path / "home")
    assert path.read_text().count('"text":"FIRST-PROMPT"') == 1 and '"text":"NEXT-PROMPT"' in path.read_text()


async def test_resume_last_with_no_session_says_so(tmp_path: Path) -> None:
    line = refused(await script("resume", "--last", "hi", cwd=tmp_path, env=user_env(tmp_path)), usage=None)
    assert line == (f"trio-agent resume: error: no session to resume in {tmp_path / 'home' / 'sessions'} "
                    "(trio-agent run keeps one per run, unless --ephemeral; TRIO_AGENT_HOME sets where)")


async def test_an_unknown_id_names_where_it_looked(tmp_path: Path) -> None:
    install_native(tmp_path / "codex-home")
    unknown = "0199a000-0000-7000-8000-00000000dead"
    line = refused(await script("resume", unknown, "hi", cwd=tmp_path, env=user_env(tmp_path)), usage=None)
    assert line == (f"trio-agent resume: error: no session {unknown} in {tmp_path / 'home' / 'sessions'} or "
                    f"{tmp_path / 'codex-home' / 'sessions'}; check the ID, or resume --last")


@pytest.mark.parametrize(("args", "says"), [
    ((), "which session? give its ID"),
    (("--last", NATIVE_ID, "hi"), "--last resumes the latest session, so it takes no ID"),
    (("--ephemeral", "--last", "hi"), None),  # run's option only: resume continues the session's file
])
async def test_resume_refuses_what_names_no_one_session(tmp_path: Path, args: tuple[str, ...],
                                                        says: str | None) -> None:
    ran = await script("resume", *args, cwd=tmp_path, env=user_env(tmp_path))
    if says is None:
        assert refused(ran, usage="trio-agent resume").endswith("unrecognized arguments: --ephemeral")
    else:
        assert says in refused(ran, usage=None)


async def test_resume_help_is_its_own(tmp_path: Path) -> None:
    ran = await script("resume", "--help", cwd=tmp_path)
    assert ran.code == 0 and ran.out.startswith("usage: trio-agent resume [options] [--last | ID] [PROMPT | -]")
    assert "--sandbox" in ran.out and "--ephemeral" not in ran.out
    assert (FIXTURES / "codex_native_rollout.jsonl").is_file()
