"""First-token latency per warmup path, side by side with the bare-socket floor.

The scripted Responses server (``_server``) runs in a **child process** (``python -m
trio_agent.cli._bench --serve``) on 127.0.0.1, so this process's CPU time is the client's
alone. It injects a one-way network delay (``--delay-ms``) on every request and
reply, a TCP+handshake round trip (``2 x delay``) once per *new* connection -- a
kept-alive HTTPS connection is not charged again -- and a "think time" before the
first frame of an answer. Each path runs ``--runs`` times after one discarded run
(lazy imports, first-use caches), interleaved: a round runs every path once, in an order
rotated each round, so the paths and their floors share the machine's same moments;
every run opens a fresh agent (except the floors).

Columns (every number in ms with two decimals, ratios with two decimals):

- ``first emit``: p50 from ``agent.prompt()`` to the emission of the first
  ``assistant.delta`` (its ``event.time``); ``first recv`` p50/p99: to the moment the
  application's ``async for event in agent.events`` received it (what a user sees).
- ``x floor``: ``first recv`` p50 over the p50 of the floor of the row's own wire
  (column ``floor``), measured in the same run. WebSocket rows: ``bare_socket_floor``,
  a raw trio-websocket client, already connected, sending the agent's own first request
  body (captured from the server) and stopping at the first delta. HTTP/SSE rows:
  ``bare_https_floor``, a raw ``httpx.AsyncClient`` kept alive (its connection opened by
  the discarded run), POSTing the HTTPS agent's own body and parsing the events line by
  line -- so an HTTPS row is never flattered or penalised by the WebSocket's wire.
- ``cpu/turn``: this process's CPU time from ``prompt()`` to ``turn.result()``,
  p50 (the runtime's CPU for one turn: no server, no agent open, no warmup).
- ``n``: samples behind each percentile (p99 of 30 samples is their maximum).

Paths: ``startup_prewarm`` (WebSocket, the prompt after ``model.warmup.completed``),
``shared_prefix_prewarm`` (SPEC sec. 9/3: ``shared_prompt_cache=True``, another agent
of the run already warmed the prefix), ``cold_connect`` (the prompt in hand at the opening,
as ``trio-agent run``: no warmup, the prompt leaves once the socket is open),
``warmup_fallback`` (the warmup fails, a second socket replays in full),
``https_store`` / ``https_ephemeral`` (one httpx client per agent: ~25 ms of CA
loading, a new connection), ``https_shared_client`` (one long-lived httpx client: a
kept-alive connection), and ``openai_sdk_https`` (the ``openai`` SDK's streaming call,
the reference client; only with ``pip install 'trio-agent[bench]'``).

    trio-agent bench --runs 50 --delay-ms 5 --think-ms 20
    python -m benchmarks.first_token ...        (the same, from a checkout)

The modules: ``_server`` (the scripted server and the handle on its child process),
``_measure`` (the clients, the runs and the table), ``_command`` (the command line),
``__main__`` (the child process). This ``__init__`` imports nothing.
"""
