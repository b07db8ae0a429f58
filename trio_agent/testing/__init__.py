"""Public test kit: a scripted fake Responses server on 127.0.0.1 and frame builders.

Use it from your own pytest-trio tests to script exactly what the model "says".
"""

from . import _frames as frames
from ._http import FakeHttpRequest
from ._server import FakeConnection, FakeResponsesServer, Handshake, RawConnection

__all__ = ["FakeConnection", "FakeHttpRequest", "FakeResponsesServer", "Handshake", "RawConnection", "frames"]
