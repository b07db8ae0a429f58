"""The schema ``app-server generate-json-schema`` prints is the truth about this server.

- The shipped subsets are what ``restrict`` makes of the vendored codex bundles (no
  hand edits, no drift).
- ``ACCEPTED`` names exactly the served methods, and for each the params fields its
  handler reads (recorded while every method runs with every codex field present),
  less those it reads only to refuse (``REFUSED``).
- ``SENT_NOTIFICATIONS``/``SENT_REQUESTS`` are exactly the codex method names the
  server's code sends; everything the server sends in a run validates against the
  exported subset as well as codex's full schema.
- Each exported file is a draft-07 schema whose refs resolve.
"""

from __future__ import annotations

import ast
import functools
import gzip
import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import referencing
import trio
import trio.testing
from referencing.jsonschema import DRAFT7

import trio_agent as ta
import trio_agent._serve as serve_package
from trio_agent._serve import _params, _router
from trio_agent._serve._router import METHODS
from trio_agent._serve._schema_export import (
    ACCEPTED,
    OUTSIDE_CODEX,
    REFUSED,
    SENT_NOTIFICATIONS,
    SENT_REQUESTS,
    SHIPPED,
    files,
    params_ref,
    shipped,
    subset_bytes,
)
from trio_agent.testing import AppServerClient, FakeConnection, LineChannel

from ._harness import Json, answer_done, app_server, run_turn, text_input
from ._schema import FIXTURES, response_pointer, validate_server_message

VENDORED = {False: FIXTURES / "codex_app_server_protocol.schemas.json.gz",
            True: FIXTURES / "codex_app_server_protocol.experimental.schemas.json.gz"}


@functools.cache
def codex(experimental: bool) -> Json:
    with gzip.open(VENDORED[experimental], "rt", encoding="utf-8") as f:
        data: Json = json.load(f)
    return data


def _params_type(document: Json, method: str) -> Json:
    """``method``'s params type in ``document`` (``{}`` when it takes none)."""
    for entry in document["definitions"]["ClientRequest"]["oneOf"]:
        if entry["properties"]["method"]["enum"] == [method]:
            ref = params_ref(entry)
            if ref is None:
                return {}
            found: Json = document["definitions"]
            for part in ref.removeprefix("#/definitions/").split("/"):
                found = found[part]
            return found
    raise AssertionError(f"{method} is not a method of codex's (experimental) schema: list it in OUTSIDE_CODEX")


@pytest.mark.parametrize("experimental", [False, True])
def test_the_shipped_subset_is_rebuilt_from_the_vendored_schema(experimental: bool) -> None:
    assert SHIPPED[experimental].read_bytes() == subset_bytes(codex(experimental)), (
        "rebuild: python -m trio_agent._serve._schema_export "
        f"{VENDORED[False]} {VENDORED[True]}")
    assert len(SHIPPED[experimental].read_bytes()) < 64_000  # small: a subset, not a copy


def test_the_table_names_the_served_methods_and_codex_fields() -> None:
    assert set(ACCEPTED) | OUTSIDE_CODEX == set(METHODS), "methods changed: update _schema_export.ACCEPTED"
    for method, fields in ACCEPTED.items():
        params = _params_type(codex(True), method)
        known = set(params.get("properties", {})).union(  # a params type of oneOf variants: theirs
            *(variant.get("properties", {}) for variant in params.get("oneOf", [])))
        assert fields | REFUSED.get(method, frozenset()) <= known, (method, fields - known)


@pytest.mark.parametrize("experimental", [False, True])
def test_every_file_is_a_schema_whose_refs_resolve(experimental: bool) -> None:
    for relative, document in files(shipped(experimental=experimental)).items():
        jsonschema.Draft7Validator.check_schema(document)
        resolver = referencing.Registry().with_resource(
            "urn:x", referencing.Resource(contents=document, specification=DRAFT7)).resolver("urn:x")
        for ref in _refs(document):
            resolver.lookup(ref)  # raises if it dangles
        assert relative.endswith(".json")


def _refs(value: object) -> list[str]:
    if isinstance(value, dict):
        own = [value["$ref"]] if isinstance(value.get("$ref"), str) else []
        return own + [ref for child in value.values() for ref in _refs(child)]
    if isinstance(value, list):
        return [ref for child in value for ref in _refs(child)]
    return []


def test_the_sent_lists_are_what_the_code_sends() -> None:
    """Every string in the server's modules that is a codex server notification or
    server request name is in the lists, and every listed one is in the code."""
    root = codex(True)["definitions"]  # the experimental document has every method of the stable one
    notifications = {entry["properties"]["method"]["enum"][0] for entry in root["ServerNotification"]["oneOf"]}
    requests = {entry["properties"]["method"]["enum"][0] for entry in root["ServerRequest"]["oneOf"]}
    strings: set[str] = set()
    for path in Path(serve_package.__file__).parent.glob("*.py"):
        if path.name != "_schema_export.py":
            strings |= {node.value for node in ast.walk(ast.parse(path.read_text()))
                        if isinstance(node, ast.Constant) and isinstance(node.value, str)}
    assert strings & notifications == SENT_NOTIFICATIONS
    assert strings & requests == SENT_REQUESTS


# -- what the handlers read ---------------------------------------------------------------

class _Recorded(dict[str, Any]):
    reads: dict[str, set[str]] = {}

    def __init__(self, method: str, raw: dict[str, Any]) -> None:
        super().__init__(raw)
        self._method = method

    def get(self, key: str, default: Any = None) -> Any:
        self.reads.setdefault(self._method, set()).add(key)
        return super().get(key, default)

    def __getitem__(self, key: str) -> Any:
        self.reads.setdefault(self._method, set()).add(key)
        return super().__getitem__(key)


class _RecordingParams(_params.Params):
    def __init__(self, method: str, raw: object) -> None:
        super().__init__(method, raw)
        self.raw = _Recorded(method, self.raw)


def _full(method: str, **given: Any) -> Json:
    """Every field codex knows for ``method`` (null), with ``given``."""
    return {**dict.fromkeys(_params_type(codex(True), method).get("properties", {})), **given}


async def test_the_handlers_read_exactly_the_exported_and_refused_fields(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, autojump_clock: trio.testing.MockClock
) -> None:
    monkeypatch.setattr(_router, "Params", _RecordingParams)
    monkeypatch.setattr(_Recorded, "reads", {})
    hold = trio.Event()

    async def reply(conn: FakeConnection, request: Json) -> None:
        if "hold on" in json.dumps(request.get("input")):
            await hold.wait()
        await answer_done(conn, request)

    async with app_server(tmp_path, reply, unload_delay=0) as harness:
        client = await harness.client()
        await _every_method(client, harness.workspace)
    assert set(_Recorded.reads) >= _DRIVEN
    for method, read in _Recorded.reads.items():  # every method the scenario drove
        listed = ACCEPTED[method] | REFUSED.get(method, frozenset())
        assert read == listed, f"{method}: read {sorted(read - listed)} not listed; {sorted(listed - read)} not read"


#: The methods ``_every_method`` drives (a method added later is checked once it is added there).
_DRIVEN = {"initialize", "model/list", "thread/start", "turn/start", "thread/inject_items", "thread/read",
           "thread/list", "thread/loaded/list", "thread/resume", "thread/fork", "thread/compact/start", "turn/steer",
           "turn/interrupt", "thread/unsubscribe", "thread/name/set", "thread/archive", "thread/unarchive",
           "thread/turns/list", "thread/revert", "account/read", "account/login/start", "account/login/cancel",
           "config/read", "hooks/list", "skills/list", "plugin/installed", "plugin/list", "app/list",
           "mcpServerStatus/list"}  # (account/logout, configRequirements/read, collaborationMode/list read nothing)


async def _every_method(client: AppServerClient, workspace: Path) -> None:
    await client.request("model/list", _full("model/list"))
    thread = await client.request("thread/start", _full("thread/start", cwd=str(workspace)))
    thread_id = thread["thread"]["id"]
    await client.request("turn/start", _full("turn/start", threadId=thread_id, input=text_input("hello")))
    await client.read_notification("turn/completed")
    await client.request("thread/inject_items", _full("thread/inject_items", threadId=thread_id, items=[
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "injected"}]}]))
    await client.request("thread/read", _full("thread/read", threadId=thread_id))
    await client.request("thread/list", _full("thread/list"))
    await client.request("thread/loaded/list", _full("thread/loaded/list"))
    await client.request("thread/resume", _full("thread/resume", threadId=thread_id))  # warm
    await client.request("thread/fork", _full("thread/fork", threadId=thread_id))
    await client.request("thread/compact/start", _full("thread/compact/start", threadId=thread_id))
    await client.read_notification("thread/compacted")  # (locally: the model has no remote compaction)
    held = await client.request("turn/start", {"threadId": thread_id, "input": text_input("hold on")})
    turn_id = held["turn"]["id"]
    await client.request("turn/steer", _full("turn/steer", threadId=thread_id, expectedTurnId=turn_id,
                                             input=text_input("and more")))
    await client.request("turn/interrupt", _full("turn/interrupt", threadId=thread_id, turnId=turn_id))
    await client.read_notification("turn/completed", lambda p: p["turn"]["id"] == turn_id)
    await _thread_admin_and_settings(client, thread_id, turn_id)
    await client.request("thread/unsubscribe", _full("thread/unsubscribe", threadId=thread_id))
    await client.read_notification("thread/closed", lambda p: p["threadId"] == thread_id)
    await client.request("thread/resume", _full("thread/resume", threadId=thread_id))  # cold


async def _thread_admin_and_settings(client: AppServerClient, thread_id: str, last_turn: str) -> None:
    """The methods of issue 22 item 2, each with every codex field present."""
    for method, given in (("thread/name/set", {"threadId": thread_id, "name": "named"}),
                          ("thread/archive", {"threadId": thread_id}), ("thread/unarchive", {"threadId": thread_id}),
                          ("thread/turns/list", {"threadId": thread_id}),
                          ("thread/revert", {"threadId": thread_id, "beforeTurnId": last_turn}),
                          ("account/read", {}), ("account/login/cancel", {"loginId": "none"}),
                          ("config/read", {}), ("hooks/list", {}), ("skills/list", {}),
                          ("collaborationMode/list", {}), ("plugin/installed", {}), ("plugin/list", {}),
                          ("app/list", {}), ("mcpServerStatus/list", {})):
        await client.request(method, _full(method, **given))
    for method in ("account/logout", "configRequirements/read"):  # null params in codex's schema
        await client.request(method)
    await client.request("account/login/start", {"type": "apiKey", "apiKey": "sk-every-method"})


# -- what the server sends fits the subset ------------------------------------------------

@functools.cache
def _subset_validator(pointer: str) -> jsonschema.Draft7Validator:
    resource = referencing.Resource(contents=shipped(experimental=True), specification=DRAFT7)
    registry: referencing.Registry[Any] = referencing.Registry().with_resource("urn:subset", resource)
    return jsonschema.Draft7Validator({"$ref": f"urn:subset{pointer}"}, registry=registry)


def validate_against_both(message: Json, answered: str | None) -> None:
    validate_server_message(message, answered)
    if "method" in message:
        pointer = "#/definitions/ServerRequest" if "id" in message else "#/definitions/ServerNotification"
        _subset_validator(pointer).validate(message)
    elif "result" in message and answered is not None:
        _subset_validator(response_pointer(answered)).validate(message["result"])


async def test_what_the_server_sends_validates_against_the_subset(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    async with app_server(tmp_path, unload_delay=0) as harness:
        client_end, server_end = trio.testing.memory_stream_pair()
        harness.nursery.start_soon(harness.app.serve_connection, LineChannel(server_end))
        client = AppServerClient(LineChannel(client_end), validate=validate_against_both)
        await client.initialize()
        thread_id = (await client.request("thread/start", {"cwd": str(harness.workspace)}))["thread"]["id"]
        done = await run_turn(client, thread_id, "hello")
        assert done["turn"]["status"] == "completed"
        await client.request("thread/read", {"threadId": thread_id, "includeTurns": True})
        await client.request("thread/list", {})
        with pytest.raises(jsonschema.ValidationError):  # the check can fail: a method the subset lacks
            _subset_validator("#/definitions/ServerNotification").validate(
                {"method": "remoteControl/status/changed", "params": {"status": "disabled"}})


async def test_initialize_reports_the_unversioned_codex_version(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """``userAgent`` is ``name/VERSION (comment) (client; version)``; clients (the official
    Python SDK) take VERSION as the codex version: ``0.0.0``, so that they read the
    schema above rather than assume a codex release's whole protocol (docs/app-server.md
    "Version"). trio-agent's own version is in the comment. On main VERSION was 0.1.0."""
    async with app_server(tmp_path) as harness:
        client = await harness.connect()
        init = await client.initialize(name="codex_python_sdk", version="0.163.0")
    agent = init["userAgent"]
    name, rest = agent.split("/", 1)
    assert (name, rest.split()[0]) == ("trio-agent", "0.0.0")
    assert f"(trio-agent {ta.__version__};" in agent and agent.endswith("(codex_python_sdk; 0.163.0)")
    assert "serverInfo" not in init  # not in codex's InitializeResponse


def test_a_method_without_params_keeps_its_response(monkeypatch: pytest.MonkeyPatch) -> None:
    """Codex gives some methods null params (``account/logout``) or optional ones
    (``anyOf [params, null]``): they restrict too, with their response type kept."""
    from trio_agent._serve import _schema_export

    accepted = {"account/logout": frozenset(), "account/rateLimits/read": frozenset(), **ACCEPTED}
    monkeypatch.setattr(_schema_export, "ACCEPTED", accepted)
    bundle = _schema_export.restrict(codex(True))
    methods = {entry["properties"]["method"]["enum"][0] for entry in bundle["definitions"]["ClientRequest"]["oneOf"]}
    assert {"account/logout", "account/rateLimits/read"} <= methods
    v2 = bundle["definitions"]["v2"]
    assert "LogoutAccountResponse" in v2 and v2["GetAccountRateLimitsParams"].get("properties") == {}
    # Params whose fields are in oneOf variants keep them; an experimental-only method
    # is in the experimental subset only.
    more = {"account/login/start": frozenset(), "collaborationMode/list": frozenset(), **ACCEPTED}
    monkeypatch.setattr(_schema_export, "ACCEPTED", more)
    stable, experimental = _schema_export.restrict(codex(False)), _schema_export.restrict(codex(True))
    assert "oneOf" in experimental["definitions"]["v2"]["LoginAccountParams"]
    assert "CollaborationModeListResponse" in experimental["definitions"]["v2"]
    assert "CollaborationModeListResponse" not in stable["definitions"]["v2"]
    monkeypatch.setattr(_schema_export, "ACCEPTED", {"memory/reset": frozenset(), **ACCEPTED})
    with pytest.raises(ValueError, match="name its response type"):
        _schema_export.restrict(codex(True))
