"""Names, archiving and turn pages (issue 22 item 2; trio_agent/_serve/_thread_admin.py).

``thread/name/set``, ``thread/archive`` and ``thread/unarchive`` answered -32601 on main
(the codex TUI names each thread after its first prompt; the Python SDK archives).
Names and the archived flag live in the thread record, so they survive unload and a
new server on the same home; archived threads leave ``thread/list`` unless it asks for
them. Every message is checked against the schema.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import trio
import trio.testing

from trio_agent.testing import AppServerClient, AppServerError

from ._harness import Json, app_server, assert_quiet, run_turn, start_thread


async def _unload(client: AppServerClient, thread_id: str) -> None:
    await client.request("thread/unsubscribe", {"threadId": thread_id})
    await client.read_notification("thread/closed", lambda p: p["threadId"] == thread_id)


def _ids(page: Json) -> list[str]:
    return [thread["id"] for thread in page["data"]]


async def test_a_name_is_shown_everywhere_and_survives_unload_and_restart(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    async with app_server(tmp_path, unload_delay=0) as harness:
        client, watcher = await harness.client(), await harness.client()
        thread_id = (await start_thread(client))["id"]
        await run_turn(client, thread_id, "hello there")
        assert await client.request("thread/name/set", {"threadId": thread_id, "name": "  Fix the parser "}) == {}
        for seen in (client, watcher):  # it describes the thread list: everyone is told
            named = await seen.read_notification("thread/name/updated")
            assert named == {"threadId": thread_id, "threadName": "Fix the parser"}
        read = await client.request("thread/read", {"threadId": thread_id})
        assert read["thread"]["name"] == "Fix the parser"
        found = await client.request("thread/list", {"searchTerm": "PARSER"})
        assert _ids(found) == [thread_id] and found["data"][0]["name"] == "Fix the parser"
        await _unload(client, thread_id)
        assert (await client.request("thread/read", {"threadId": thread_id}))["thread"]["name"] == "Fix the parser"
        # An unloaded thread is renamed in its record.
        await client.request("thread/name/set", {"threadId": thread_id, "name": "Parser, take two"})
    async with app_server(tmp_path) as harness:  # a new server on the same home
        client = await harness.client()
        resumed = await client.request("thread/resume", {"threadId": thread_id})
        assert resumed["thread"]["name"] == "Parser, take two" and len(resumed["thread"]["turns"]) == 1
        await client.request("thread/name/set", {"threadId": thread_id, "name": ""})  # clears it
        assert (await client.read_notification("thread/name/updated"))["threadName"] is None
        assert (await client.request("thread/read", {"threadId": thread_id}))["thread"]["name"] is None


@pytest.mark.parametrize(("name", "said"), [
    ("two\nlines", "one line of printable text"),
    ("x" * 1025, "at most 1024"),
    (None, "missing required field `name`"),
    (7, "missing required field `name`"),
])
async def test_a_bad_name_is_refused_and_changes_nothing(
    tmp_path: Path, autojump_clock: trio.testing.MockClock, name: object, said: str
) -> None:
    async with app_server(tmp_path) as harness:
        client = await harness.client()
        thread_id = (await start_thread(client))["id"]
        await client.request("thread/name/set", {"threadId": thread_id, "name": "kept"})
        with pytest.raises(AppServerError) as caught:
            await client.request("thread/name/set", {"threadId": thread_id, "name": name})
        assert caught.value.code == -32602 and said in caught.value.message
        assert (await client.request("thread/read", {"threadId": thread_id}))["thread"]["name"] == "kept"
        with pytest.raises(AppServerError) as unknown:
            await client.request("thread/name/set", {"threadId": "01a230c2-7dc6-7f80-89ae-df3d5f8ebcde", "name": "x"})
        assert unknown.value.code == -32600 and "thread not found" in unknown.value.message


async def test_archived_threads_leave_the_list_unless_asked_for_and_stay_archived(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    async with app_server(tmp_path) as harness:
        client, watcher = await harness.client(), await harness.client()
        kept, archived = (await start_thread(client))["id"], (await start_thread(client))["id"]
        for thread_id, prompt in ((kept, "kept one"), (archived, "old one")):
            await run_turn(client, thread_id, prompt)
        assert await client.request("thread/archive", {"threadId": archived}) == {}
        assert await watcher.read_notification("thread/archived") == {"threadId": archived}
        assert _ids(await client.request("thread/list", {})) == [kept]
        assert _ids(await client.request("thread/list", {"archived": False})) == [kept]
        assert _ids(await client.request("thread/list", {"archived": True})) == [archived]
        assert await client.request("thread/archive", {"threadId": archived}) == {}  # already: nothing to say
        await assert_quiet(watcher, "thread/archived", 5)
        # Archiving changes nothing else: the loaded thread still runs turns.
        assert (await run_turn(client, archived, "still works"))["turn"]["status"] == "completed"
    async with app_server(tmp_path) as harness:  # the record keeps it
        client = await harness.client()
        assert _ids(await client.request("thread/list", {"archived": True})) == [archived]
        unarchived = await client.request("thread/unarchive", {"threadId": archived})
        assert unarchived["thread"]["id"] == archived and unarchived["thread"]["status"] == {"type": "notLoaded"}
        assert await client.read_notification("thread/unarchived") == {"threadId": archived}
        assert sorted(_ids(await client.request("thread/list", {}))) == sorted([kept, archived])
        assert (await client.request("thread/list", {"archived": True}))["data"] == []
        ephemeral = (await start_thread(client, ephemeral=True))["id"]
        with pytest.raises(AppServerError) as caught:
            await client.request("thread/archive", {"threadId": ephemeral})
        assert caught.value.code == -32600 and "ephemeral" in caught.value.message


async def test_turns_list_pages_a_threads_turns_loaded_or_not(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    async with app_server(tmp_path, unload_delay=0) as harness:
        client = await harness.client()
        thread_id = (await start_thread(client))["id"]
        turns = [(await run_turn(client, thread_id, prompt))["turn"]["id"] for prompt in ("one", "two", "three")]
        for loaded in (True, False):
            if not loaded:
                await _unload(client, thread_id)
            first = await client.request("thread/turns/list", {"threadId": thread_id, "limit": 2})
            assert [turn["id"] for turn in first["data"]] == [turns[2], turns[1]]  # newest first
            assert {turn["itemsView"] for turn in first["data"]} == {"summary"}
            assert [item["type"] for item in first["data"][0]["items"]] == ["agentMessage"]
            assert first["nextCursor"] == turns[0] and first["backwardsCursor"] == turns[2]
            rest = await client.request("thread/turns/list", {"threadId": thread_id, "cursor": first["nextCursor"]})
            assert [turn["id"] for turn in rest["data"]] == [turns[0]] and rest["nextCursor"] is None
            back = await client.request("thread/turns/list", {"threadId": thread_id, "sortDirection": "asc",
                                                              "cursor": first["backwardsCursor"]})
            assert [turn["id"] for turn in back["data"]] == [turns[2]]  # the anchor again
            full = await client.request("thread/turns/list", {"threadId": thread_id, "sortDirection": "asc",
                                                              "itemsView": "full"})
            assert [turn["id"] for turn in full["data"]] == turns
            assert [item["type"] for item in full["data"][0]["items"]] == ["userMessage", "agentMessage"]
        for bad, said in (({"cursor": "nope"}, "names no turn"), ({"sortDirection": "up"}, "sortDirection"),
                          ({"itemsView": "all"}, "itemsView")):
            with pytest.raises(AppServerError) as caught:
                await client.request("thread/turns/list", {"threadId": thread_id, **bad})
            assert caught.value.code == -32602 and said in caught.value.message


async def test_list_filters_say_what_they_say_about_this_servers_threads(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """What the codex TUI asks (``sourceKinds``, ``ancestorThreadId``, a ``sectionId``):
    on main these filters were ignored, so an "agents of this thread" query listed every
    thread and the default list showed child threads."""
    from .test_children import spawned
    from .test_thread_unsubscribe_seeds import ParentAndChild

    model = ParentAndChild()
    async with app_server(tmp_path, model, multi_agent=True) as harness:
        client, parent_id, child_id = await spawned(harness, model)
        other = (await start_thread(client))["id"]
        await run_turn(client, other, "another task")

        async def listed(**params: object) -> list[str]:
            return sorted(_ids(await client.request("thread/list", params)))

        assert await listed() == sorted([parent_id, other])  # interactive sources: no child threads
        assert await listed(sourceKinds=[]) == sorted([parent_id, other])
        assert await listed(sourceKinds=["subAgentThreadSpawn"]) == [child_id]
        assert await listed(sourceKinds=["appServer", "subAgentThreadSpawn"]) == sorted([parent_id, child_id, other])
        assert await listed(ancestorThreadId=parent_id, sourceKinds=["subAgentThreadSpawn"]) == [child_id]
        assert await listed(ancestorThreadId=other, sourceKinds=["subAgentThreadSpawn"]) == []
        assert await listed(parentThreadId=parent_id) == [child_id]
        assert await listed(includedThreadIds=[other, child_id]) == [other]
        assert await listed(excludedThreadIds=[other]) == [parent_id]
        assert await listed(sectionId="01984de2-8f74-7c91-a3b2-5c5e937cf318") == []  # no sections here
        assert await listed(sectionId=None, projectId=None) == sorted([parent_id, other])
        assert await listed(originators=["trio-agent-tests"]) == sorted([parent_id, other])
        assert await listed(originators=["someone-else"]) == []
        assert await listed(sortKey="section_position", currentAccountOnly=True) == sorted([parent_id, other])
        for bad, said in (({"sortKey": "size"}, "`sortKey`"), ({"sourceKinds": ["robot"]}, "`sourceKinds`"),
                          ({"includedThreadIds": ["x"] * 101}, "at most 100")):
            with pytest.raises(AppServerError) as caught:
                await client.request("thread/list", bad)
            assert caught.value.code == -32602 and said in caught.value.message
