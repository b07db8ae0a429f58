"""The fake server answers the remote tools too: web search and image generation.

``web__run`` POSTs ``{api_base_url}/alpha/search`` and ``image_gen__imagegen`` POSTs
``{api_base_url}/images/generations`` (or ``/images/edits``). Point the agent's
``api_base_url`` at ``server.http_base_url`` (for a WebSocket agent too: the model
traffic keeps its own ``websocket_url``) and answer those requests from the test::

    request = await answer_web_search(server, "Paris is the capital of France.")
    assert request.body["commands"] == {"search_query": [{"q": "capital of France"}]}

Each helper accepts the server's next HTTP connection, checks that it is the expected
endpoint (``AssertionError`` otherwise, naming what arrived), answers it and returns
the ``FakeHttpRequest`` so the test can check the request on the wire.
"""

from __future__ import annotations

import base64
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ._http import FakeHttpRequest

if TYPE_CHECKING:
    from ._server import FakeResponsesServer

__all__ = ["PNG_PIXEL", "answer_image_request", "answer_web_search", "image_response", "search_response"]

# A valid 1x1 PNG (a transparent pixel), for image tests.
PNG_PIXEL = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg=="
)


def search_response(output: str, results: Sequence[dict[str, Any]] = ()) -> dict[str, Any]:
    """The body the search endpoint answers with: the text the model reads, plus results."""
    return {"output": output, "results": list(results), "encrypted_output": "fake-ciphertext"}


def image_response(image: bytes = PNG_PIXEL) -> dict[str, Any]:
    """The body the images endpoints answer with: one base64 PNG."""
    return {"created": 1, "data": [{"b64_json": base64.b64encode(image).decode("ascii")}]}


async def _accept(server: FakeResponsesServer, suffixes: tuple[str, ...]) -> FakeHttpRequest:
    request = await server.accept_http()
    if request.method != "POST" or not request.path.endswith(suffixes):
        await request.respond(404, '{"error": {"message": "not this endpoint"}}')
        raise AssertionError(f"expected a POST to ...{' or ...'.join(suffixes)}, got {request.method} {request.path}")
    return request


async def answer_web_search(
    server: FakeResponsesServer, output: str, *, results: Sequence[dict[str, Any]] = (), status: int = 200
) -> FakeHttpRequest:
    """Accept the next web search request and answer it (``status`` other than 200:
    an error body instead)."""
    request = await _accept(server, ("/alpha/search",))
    if status == 200:
        await request.respond_json(search_response(output, results))
    else:
        await request.respond_json({"error": {"message": output}}, status=status)
    return request


async def answer_image_request(
    server: FakeResponsesServer, image: bytes = PNG_PIXEL, *, status: int = 200
) -> FakeHttpRequest:
    """Accept the next image generation or edit request and answer it with ``image``."""
    request = await _accept(server, ("/images/generations", "/images/edits"))
    if status == 200:
        await request.respond_json(image_response(image))
    else:
        await request.respond_json({"error": {"message": "image request refused"}}, status=status)
    return request
