"""Cassettes: a live session's traffic, recorded once and replayed as a fake server.

- ``format``: the JSONL format (header, observation kinds), ``Cassette.load`` and its
  validation, ``CassetteError``. Pure: no Trio, no sockets.
- ``writer``: ``CassetteWriter``, the buffered file writer one agent tree shares.
- ``recorder``: the add-on itself, attached through the observer seam
  (``_runtime/_observers.py``): ``CassetteTree`` (the tree's writer) and the per-agent
  ``CassetteRecorder``, which is also the agent's connection tap (``_transport/tap.py``).

Replay lives in ``trio_agent.testing`` (``ReplayServer``, ``replay``); the format is
documented for users in ``docs/cassettes.md``. Nothing here is imported by
``import trio_agent``: the package face's add-on (``_wiring.py``) imports the recorder
only for an agent opened with ``AgentConfig(record=...)``.
"""
