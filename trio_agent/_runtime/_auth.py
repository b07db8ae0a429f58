"""Request headers for both transports, from an API key or ChatGPT auth (SPEC sec. 6)."""

from __future__ import annotations

from typing import Any

from .._config import AgentConfig, ChatGptAuth, ChatGptAuthSnapshot

__all__ = ["VERSION", "https_headers", "websocket_headers"]

VERSION = "0.1.0"


async def _auth(config: AgentConfig) -> tuple[list[tuple[str, str]], ChatGptAuthSnapshot | None]:
    if isinstance(config.auth, ChatGptAuth):
        snapshot = await config.auth.source.snapshot()
        headers = [("Authorization", f"Bearer {snapshot.token}")]
        if snapshot.account_id:
            headers.append(("ChatGPT-Account-ID", snapshot.account_id))
        return headers, snapshot
    return [("Authorization", f"Bearer {config.auth}")], None


def _session(config: AgentConfig) -> list[tuple[str, str]]:
    session = config.session_id
    return [
        ("x-openai-internal-codex-responses-lite", "true"),
        ("session-id", session),
        ("thread-id", session),
        ("x-client-request-id", session),
        ("User-Agent", f"trio-agent/{VERSION}"),
    ]


async def websocket_headers(config: AgentConfig) -> list[tuple[str, str]]:
    """Handshake headers: auth, the Responses WebSocket beta and the session ids."""
    auth, _ = await _auth(config)
    return [
        *auth,
        ("OpenAI-Beta", "responses_websockets=2026-02-06"),
        ("x-responsesapi-include-timing-metrics", "true"),
        *_session(config),
    ]


async def https_headers(config: AgentConfig) -> tuple[list[tuple[str, str]], Any]:
    """HTTPS request headers, and the ChatGPT snapshot they came from (None for API keys)."""
    auth, snapshot = await _auth(config)
    return [*auth, *_session(config)], snapshot
