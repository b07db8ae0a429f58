"""Every message the server sends, checked against the real Codex app-server schema.

The schema is the bundle printed by ``codex app-server generate-json-schema`` (fixtures/);
its refs are ``#/definitions/v2/<Name>`` from the document root, so the registry holds
the whole document as one resource and each check is a ``$ref`` into it. A response is
checked as a ``JSONRPCResponse`` and its ``result`` against the response type of the
method it answers (``ThreadStartParams`` -> ``ThreadStartResponse``).

A method only the experimental bundle has (``generate-json-schema --experimental``, the
same codex 0.171.0: ``collaborationMode/list``) has its result checked against that
bundle; ``thread/rollback``, which codex 0.171 no longer has (``thread/revert`` replaced
it), against what earlier codex answered: ``{thread: Thread}`` (``ThreadReadResponse``).
"""

from __future__ import annotations

import functools
import gzip
import json
from pathlib import Path
from typing import Any

import jsonschema
import referencing
from referencing.jsonschema import DRAFT7

FIXTURES = Path(__file__).parent / "fixtures"
SCHEMA_URI = "urn:codex-app-server-protocol"
Json = dict[str, Any]


EXPERIMENTAL_URI = "urn:codex-app-server-protocol-experimental"
# Methods of earlier codex versions that 0.171 dropped, with the response type they had.
_FORMER_METHODS = {"thread/rollback": "#/definitions/v2/ThreadReadResponse"}
# Methods whose params are null, so their response type is not named after their params.
_NO_PARAMS = {"account/logout": "#/definitions/v2/LogoutAccountResponse",
              "configRequirements/read": "#/definitions/v2/ConfigRequirementsReadResponse"}


@functools.cache
def document(experimental: bool = False) -> Json:
    name = "experimental.schemas" if experimental else "schemas"
    with gzip.open(FIXTURES / f"codex_app_server_protocol.{name}.json.gz", "rt", encoding="utf-8") as f:
        data: Json = json.load(f)
    return data


@functools.cache
def _registry() -> referencing.Registry[Any]:
    resource = referencing.Resource(contents=document(), specification=DRAFT7)
    experimental = referencing.Resource(contents=document(experimental=True), specification=DRAFT7)
    return referencing.Registry().with_resources([(SCHEMA_URI, resource), (EXPERIMENTAL_URI, experimental)])


@functools.cache
def validator(pointer: str, uri: str = SCHEMA_URI) -> jsonschema.Draft7Validator:
    """A validator for ``#/definitions/...`` (``pointer``) of the schema (or of the
    experimental bundle, ``uri=EXPERIMENTAL_URI``)."""
    return jsonschema.Draft7Validator({"$ref": f"{uri}{pointer}"}, registry=_registry())


def _params_ref(entry: Json) -> str | None:
    params = entry["properties"].get("params", {})
    refs = [params.get("$ref"), *(option.get("$ref") for option in params.get("anyOf", []))]
    return next((ref for ref in refs if ref is not None), None)


def _request_entry(method: str, experimental: bool) -> Json | None:
    for entry in document(experimental)["definitions"]["ClientRequest"]["oneOf"]:
        if entry["properties"]["method"]["enum"] == [method]:
            return entry
    return None


@functools.cache
def response_pointer(method: str) -> str:
    entry = _request_entry(method, experimental=False)
    if entry is None:
        if method in _FORMER_METHODS:
            return _FORMER_METHODS[method]
        raise AssertionError(f"{method!r} is not a method of the Codex app-server protocol")
    if method in _NO_PARAMS:
        return _NO_PARAMS[method]
    params_ref = _params_ref(entry)
    assert params_ref is not None and params_ref.endswith("Params"), (method, params_ref)
    return params_ref.removesuffix("Params") + "Response"


def _experimental_response_pointer(method: str) -> str | None:
    """The response type of a method only the experimental bundle has (None: not one)."""
    if _request_entry(method, experimental=False) is not None or method in _FORMER_METHODS:
        return None
    entry = _request_entry(method, experimental=True)
    if entry is None:
        return None
    params_ref = _params_ref(entry)
    assert params_ref is not None and params_ref.endswith("Params"), (method, params_ref)
    return params_ref.removesuffix("Params") + "Response"


def check(pointer: str, value: Any, what: str, uri: str = SCHEMA_URI) -> None:
    error = jsonschema.exceptions.best_match(validator(pointer, uri).iter_errors(value))
    if error is not None:
        path = "/".join(str(part) for part in error.absolute_path)
        raise AssertionError(f"{what} does not match {pointer} at /{path}: {error.message}\n{json.dumps(value)[:2000]}")


def validate_server_message(message: Json, answered_method: str | None) -> None:
    """Raise AssertionError unless ``message`` is what the schema allows the server to send."""
    if "method" in message and "id" in message:
        check("#/definitions/ServerRequest", message, f"server request {message['method']}")
    elif "method" in message:
        check("#/definitions/ServerNotification", message, f"notification {message['method']}")
    elif "error" in message:
        check("#/definitions/JSONRPCError", message, "error response")
    else:
        check("#/definitions/JSONRPCResponse", message, "response")
        assert answered_method is not None, f"a response to no request of ours: {message}"
        experimental = _experimental_response_pointer(answered_method)
        if experimental is not None:
            check(experimental, message["result"], f"the result of {answered_method} (experimental)", EXPERIMENTAL_URI)
            return
        check(response_pointer(answered_method), message["result"], f"the result of {answered_method}")
