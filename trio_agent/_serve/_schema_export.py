"""``trio-agent app-server generate-json-schema``: the JSON Schema of what this server
implements, in codex's layout.

Theory of operation. Codex prints its protocol as a draft-07 bundle
(``codex_app_server_protocol.schemas.json``: root types under ``definitions``, the v2
thread/turn types under ``definitions.v2``) plus one self-contained file per type
(``ClientRequest.json``, ``v2/TurnStartParams.json``: the type, with the closure of what
it references flattened into its own ``definitions``). Clients read it to learn what a
server accepts: the official Python SDK, facing a server that reports version
``0.0.0``, reads the ``properties`` of ``v2/TurnStartParams.json``,
``v2/ThreadResumeParams.json`` and ``v2/ThreadForkParams.json`` before it sends
``turnTrigger``, ``serviceTierForTurn``, ``toolOutput`` or ``excludeTurns``
(docs/app-server.md "Version").

The schema printed here is codex's own (the 0.171.0 bundle vendored in
``tests/serve/fixtures``), restricted by ``restrict`` to the truth of this server:
``ClientRequest`` lists only the methods of ``ACCEPTED`` and each one's params only the
fields this server reads and honours; ``ServerRequest`` and ``ServerNotification`` list
only what it sends; then every definition nothing kept refers to is dropped. Response
and notification types stay codex's (what the server sends is validated against them
in the test suite). Nested types are not narrowed: a variant the server refuses (a
``skill`` input, say) is in docs/app-server.md "What differs from codex".

Two restricted bundles ship in the package, as codex prints two schemas: the subset of
its stable schema (``codex_subset.schemas.json.gz``) and, for ``--experimental``, of
its experimental one, which has more fields (``dynamicTools``...). Both come from the
bundles vendored in ``tests/serve/fixtures`` (codex 0.171.0) and are rebuilt with
``python -m trio_agent._serve._schema_export STABLE.json.gz EXPERIMENTAL.json.gz`` when
this table or the vendored schemas change; tests check that the shipped files are what
``restrict`` makes of the vendored ones, and that the table matches what the handlers
read (``tests/serve/test_schema_export.py``).
"""

from __future__ import annotations

import copy
import gzip
import json
import sys
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

__all__ = ["ACCEPTED", "OUTSIDE_CODEX", "REFUSED", "SENT_NOTIFICATIONS", "SENT_REQUESTS", "files", "params_ref",
           "restrict", "shipped", "subset_bytes", "write_schema"]

Json = dict[str, Any]
#: The shipped subsets: of codex's stable schema, and of its ``--experimental`` one.
SHIPPED = {False: Path(__file__).with_name("codex_subset.schemas.json.gz"),
           True: Path(__file__).with_name("codex_subset.experimental.schemas.json.gz")}

#: Each implemented method and the params fields it honours (docs/app-server.md "Methods").
ACCEPTED: Mapping[str, frozenset[str]] = {
    "initialize": frozenset({"clientInfo", "capabilities"}),
    "model/list": frozenset({"cursor", "limit"}),
    "thread/start": frozenset({"model", "cwd", "ephemeral", "baseInstructions", "developerInstructions", "config",
                               "dynamicTools", "sandbox", "permissions", "approvalPolicy", "approvalsReviewer"}),
    "thread/resume": frozenset({"threadId", "excludeTurns", "sandbox", "permissions", "approvalPolicy",
                                "approvalsReviewer"}),
    "thread/fork": frozenset({"threadId", "ephemeral", "excludeTurns", "sandbox", "permissions", "approvalPolicy",
                              "approvalsReviewer"}),
    "thread/read": frozenset({"threadId", "includeTurns"}),
    "thread/list": frozenset({"cursor", "limit", "archived", "cwd", "searchTerm", "modelProviders", "originators",
                              "sourceKinds", "parentThreadId", "ancestorThreadId", "includedThreadIds",
                              "excludedThreadIds", "sectionId", "projectId", "sortKey", "sortDirection"}),
    "thread/loaded/list": frozenset({"cursor", "limit"}),
    "thread/unsubscribe": frozenset({"threadId"}),
    "thread/inject_items": frozenset({"threadId", "items"}),
    "thread/compact/start": frozenset({"threadId"}),
    "thread/name/set": frozenset({"threadId", "name"}),
    "thread/archive": frozenset({"threadId"}),
    "thread/unarchive": frozenset({"threadId"}),
    "thread/turns/list": frozenset({"threadId", "cursor", "limit", "sortDirection", "itemsView"}),
    "thread/revert": frozenset({"threadId", "beforeTurnId"}),
    "turn/start": frozenset({"threadId", "input", "clientUserMessageId", "effort", "sandboxPolicy", "approvalPolicy",
                             "model", "outputSchema"}),
    "turn/steer": frozenset({"threadId", "expectedTurnId", "input", "clientUserMessageId"}),
    "turn/interrupt": frozenset({"threadId", "turnId"}),
    "account/read": frozenset({"refreshToken"}),
    "account/login/start": frozenset({"type", "apiKey"}),  # fields of LoginAccountParams' oneOf variants
    "account/logout": frozenset(),
    "account/login/cancel": frozenset({"loginId"}),
    "config/read": frozenset({"cwd", "includeLayers"}),
    "configRequirements/read": frozenset(),
    "hooks/list": frozenset({"cwds", "threadId"}),
    "skills/list": frozenset({"cwds", "forceReload"}),
    "collaborationMode/list": frozenset(),
    "plugin/installed": frozenset({"cwds"}),
    "plugin/list": frozenset({"cwds"}),
    "app/list": frozenset({"cursor", "limit"}),
    "mcpServerStatus/list": frozenset({"cursor", "limit"}),
}
#: Methods served that codex 0.171's schema does not have (so not in the exported one).
OUTSIDE_CODEX: frozenset[str] = frozenset({"thread/rollback"})  # codex before 0.171 (0.171: thread/revert)
#: The response type of a method codex gives no params type to (it is named after the params).
_RESPONSES = {"account/logout": "LogoutAccountResponse", "configRequirements/read": "ConfigRequirementsReadResponse"}
#: Fields a handler reads only to refuse them (so they are not in the schema).
REFUSED: Mapping[str, frozenset[str]] = {}
#: What the server sends (docs/app-server.md, after the methods table).
SENT_REQUESTS = frozenset({"item/tool/call", "item/commandExecution/requestApproval",
                           "item/fileChange/requestApproval"})
SENT_NOTIFICATIONS = frozenset({
    "thread/started", "thread/status/changed", "thread/closed", "thread/tokenUsage/updated", "thread/compacted",
    "thread/name/updated", "thread/archived", "thread/unarchived", "thread/reverted",
    "turn/started", "turn/completed", "item/started", "item/completed", "item/agentMessage/delta",
    "item/reasoning/summaryTextDelta", "item/commandExecution/outputDelta",
    "item/commandExecution/terminalInteraction", "item/mcpToolCall/progress", "turn/plan/updated",
    "item/autoApprovalReview/started",
    "item/autoApprovalReview/completed", "serverRequest/resolved", "account/updated", "account/login/completed",
    "error", "warning",
})
_ENVELOPE = ("JSONRPCMessage", "JSONRPCRequest", "JSONRPCNotification", "JSONRPCResponse", "JSONRPCError",
             "JSONRPCErrorError", "RequestId")
_UNIONS = ("ClientRequest", "ClientNotification", "ServerRequest", "ServerNotification")
#: The types codex writes a file of its own for (with the unions and the envelope).
_MESSAGE_TYPES = ("Params", "Response", "Notification")
_V2 = "#/definitions/v2/"


def _method(entry: Json) -> str:
    method: str = entry["properties"]["method"]["enum"][0]
    return method


def params_ref(entry: Json) -> str | None:
    """The params type of a request entry (codex writes ``$ref``, or ``anyOf [$ref, null]``,
    or ``{type: null}`` for none)."""
    params = entry["properties"].get("params", {})
    refs = [params.get("$ref"), *(option.get("$ref") for option in params.get("anyOf", []))]
    return next((ref for ref in refs if isinstance(ref, str)), None)


def _response(entry: Json) -> tuple[str, str]:
    method, ref = _method(entry), params_ref(entry)
    if method in _RESPONSES:
        return "v2", _RESPONSES[method]
    if ref is None:
        raise ValueError(f"{method} has no params type: name its response type in _schema_export._RESPONSES")
    space, name = _name(ref)
    return space, name.removesuffix("Params") + "Response"


def _name(ref: str) -> tuple[str, str]:
    """``("v2" | "", Name)`` of a bundle ref."""
    return ("v2", ref.removeprefix(_V2)) if ref.startswith(_V2) else ("", ref.removeprefix("#/definitions/"))


def _refs(value: object) -> Iterator[str]:
    if isinstance(value, dict):
        ref = value.get("$ref")
        if isinstance(ref, str):
            yield ref
        for child in value.values():
            yield from _refs(child)
    elif isinstance(value, list):
        for child in value:
            yield from _refs(child)


def _narrow(definition: Json, method: str) -> Json:
    """``definition`` (a params type) with only the fields ``method`` honours (a type
    whose fields are in ``oneOf`` variants keeps them: nested types are codex's)."""
    if "properties" not in definition:
        return definition
    fields = ACCEPTED[method] & set(definition["properties"])  # an experimental field: not in the stable one
    required = definition.get("required", [])
    if not set(required) <= fields:
        raise ValueError(f"{method}: codex requires {sorted(set(required) - fields)}, which the table leaves out")
    narrowed = {**definition, "properties": {k: v for k, v in definition["properties"].items() if k in fields}}
    if required:
        narrowed["required"] = list(required)
    return narrowed


def restrict(document: Json) -> Json:
    """The bundle ``document`` (codex's) restricted to what this server implements."""
    root = copy.deepcopy({k: v for k, v in document["definitions"].items() if k != "v2"})
    v2 = copy.deepcopy(document["definitions"]["v2"])
    tables = {"": root, "v2": v2}
    kept = {"ClientRequest": ACCEPTED.keys(), "ServerRequest": SENT_REQUESTS, "ServerNotification": SENT_NOTIFICATIONS}
    for union, methods in kept.items():  # (an experimental method is not in the stable document)
        root[union] = {**root[union], "oneOf": [entry for entry in root[union]["oneOf"] if _method(entry) in methods]}
    for entry in root["ClientRequest"]["oneOf"]:
        ref = params_ref(entry)
        if ref is not None:
            space, name = _name(ref)
            tables[space][name] = _narrow(tables[space][name], _method(entry))
    wanted = [("", name) for name in (*_UNIONS, *_ENVELOPE)]
    wanted += [_response(entry) for entry in root["ClientRequest"]["oneOf"] + root["ServerRequest"]["oneOf"]]
    closure: dict[tuple[str, str], Json] = {}
    while wanted:
        key = wanted.pop()
        if key not in closure:
            closure[key] = tables[key[0]][key[1]]
            wanted.extend(_name(ref) for ref in _refs(closure[key]))
    definitions: Json = {name: closure[(space, name)] for space, name in sorted(closure) if not space}
    definitions["v2"] = {name: closure[(space, name)] for space, name in sorted(closure) if space}
    return {"$schema": document["$schema"], "title": document["title"], "type": document.get("type", "object"),
            "description": "The subset of the Codex app-server protocol that trio-agent implements",
            "definitions": definitions}


def _same(a: Json, b: Json) -> bool:
    meta = ("$schema", "title", "description")
    return {k: v for k, v in a.items() if k not in meta} == {k: v for k, v in b.items() if k not in meta}


def _flat(bundle: Json, space: str, name: str) -> Json:
    """One type as codex writes its own file: itself, and what it references flattened
    into ``definitions`` (refs ``#/definitions/Name``)."""
    defs = bundle["definitions"]
    tables = {"": defs, "v2": defs["v2"]}
    seen: dict[str, tuple[str, Json]] = {}
    todo = [_name(ref) for ref in _refs(tables[space][name])]
    while todo:
        ref_space, ref_name = todo.pop()
        definition = tables[ref_space][ref_name]
        if ref_name in seen:
            if seen[ref_name][0] != ref_space and not _same(seen[ref_name][1], definition):
                raise ValueError(f"{ref_name} means two things in the bundle")
            continue
        seen[ref_name] = (ref_space, definition)
        todo.extend(_name(ref) for ref in _refs(definition))
    text = json.dumps({"$schema": bundle["$schema"], **tables[space][name],
                       "definitions": {k: seen[k][1] for k in sorted(seen)}})
    flattened: Json = json.loads(text.replace(f'"{_V2}', '"#/definitions/'))
    if "title" not in flattened:
        flattened["title"] = name
    return flattened


def files(bundle: Json) -> dict[str, Json]:
    """Codex's layout of ``bundle``: relative path -> document."""
    out: dict[str, Json] = {"codex_app_server_protocol.schemas.json": bundle}
    for name in bundle["definitions"]:
        if name in _UNIONS or name in _ENVELOPE or name.endswith(_MESSAGE_TYPES):
            out[f"{name}.json"] = _flat(bundle, "", name)
    for name in bundle["definitions"]["v2"]:
        if name.endswith(_MESSAGE_TYPES):
            out[f"v2/{name}.json"] = _flat(bundle, "v2", name)
    return out


def shipped(*, experimental: bool) -> Json:
    """The shipped subset bundle."""
    with gzip.open(SHIPPED[experimental], "rt", encoding="utf-8") as f:
        bundle: Json = json.load(f)
    return bundle


def write_schema(out: Path, *, experimental: bool) -> int:
    """Write the shipped schema under ``out`` (created); 0, or 2 with one stderr line."""
    bundle = shipped(experimental=experimental)
    try:
        for relative, document in files(bundle).items():
            path = out / relative
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps(document, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    except OSError as exc:
        print(f"trio-agent app-server generate-json-schema: cannot write {out}: {exc}", file=sys.stderr)
        return 2
    return 0


def subset_bytes(document: Json) -> bytes:
    """The shipped file's bytes for codex's bundle ``document``."""
    text = json.dumps(restrict(document), sort_keys=True, separators=(",", ":"))
    return gzip.compress(text.encode(), mtime=0)


def _rebuild(stable: Path, experimental: Path) -> None:
    """Rebuild both shipped subsets from codex's bundles (gzipped)."""
    for is_experimental, source in ((False, stable), (True, experimental)):
        with gzip.open(source, "rt", encoding="utf-8") as f:
            SHIPPED[is_experimental].write_bytes(subset_bytes(json.load(f)))


if __name__ == "__main__":  # python -m trio_agent._serve._schema_export STABLE.json.gz EXPERIMENTAL.json.gz
    _rebuild(Path(sys.argv[1]), Path(sys.argv[2]))
