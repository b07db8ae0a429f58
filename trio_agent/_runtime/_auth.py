"""Moved to ``trio_agent._transport.auth`` (issue 7); this re-export keeps old imports
working until the runtime imports the new module directly."""

from __future__ import annotations

from .._transport.auth import VERSION, https_headers, recover_unauthorized, websocket_headers

__all__ = ["VERSION", "https_headers", "recover_unauthorized", "websocket_headers"]
