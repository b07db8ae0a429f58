"""Every message the server sends, checked against the real Codex app-server schema.

The schema is the bundle printed by ``codex app-server generate-json-schema`` (fixtures/);
its refs are ``#/definitions/v2/<Name>`` from the document root, so the registry holds
the whole document as one resource and each check is a ``$ref`` into it. A response is
checked as a ``JSONRPCResponse`` and its ``result`` against the response type of the
method it answers (``ThreadStartParams`` -> ``ThreadStartResponse``).
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


@functools.cache
def document() -> Json:
    with gzip.open(FIXTURES / "codex_app_server_protocol.schemas.json.gz", "rt", encoding="utf-8") as f:
        data: Json = json.load(f)
    return data


@functools.cache
def _registry() -> referencing.Registry[Any]:
    resource = referencing.Resource(contents=document(), specification=DRAFT7)
    return referencing.Registry().with_resource(SCHEMA_URI, resource)


@functools.cache
def validator(pointer: str) -> jsonschema.Draft7Validator:
    """A validator for ``#/definitions/...`` (``pointer``) of the schema."""
    return jsonschema.Draft7Validator({"$ref": f"{SCHEMA_URI}{pointer}"}, registry=_registry())


@functools.cache
def response_pointer(method: str) -> str:
    for entry in document()["definitions"]["ClientRequest"]["oneOf"]:
        if entry["properties"]["method"]["enum"] == [method]:
            params_ref = entry["properties"].get("params", {}).get("$ref")
            assert params_ref is not None and params_ref.endswith("Params"), (method, params_ref)
            return params_ref.removesuffix("Params") + "Response"
    raise AssertionError(f"{method!r} is not a method of the Codex app-server protocol")


def check(pointer: str, value: Any, what: str) -> None:
    error = jsonschema.exceptions.best_match(validator(pointer).iter_errors(value))
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
        check(response_pointer(answered_method), message["result"], f"the result of {answered_method}")
