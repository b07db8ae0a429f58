"""The model client of one agent: the response chain, the attempts and their retries
(``_sampling``), the request bodies and their JSON text, the exchange interface with
its WebSocket and HTTPS implementations, the one live socket (``_connections``), the
frames of a response turned into events (``_response_feed``), and compaction.

Nothing is imported here (see ``_turns/__init__.py``).
"""
