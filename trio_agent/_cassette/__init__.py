"""Cassettes: a live session's traffic, recorded once and replayed as a fake server.

- ``format``: the JSONL format (header, observation kinds), ``Cassette.load`` and its
  validation, ``CassetteError``. Pure: no Trio, no sockets.
- ``writer``: ``CassetteWriter``, the buffered file writer one agent tree shares.
- ``recorder``: the per-agent ``CassetteTap`` and the transport wrappers it installs
  once per connection (``RecordingLink``) or per HTTPS client (``HttpsRecording``).

Replay lives in ``trio_agent.testing`` (``ReplayServer``, ``replay``); the format is
documented for users in ``docs/cassettes.md``. Nothing here is imported by
``import trio_agent``: an agent imports the recorder only when ``AgentConfig(record=...)``
is set.
"""
