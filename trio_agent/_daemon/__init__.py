"""The warm daemon: ``trio-agent run`` served by prewarmed worker processes.

``python -m trio_agent._daemon DIR`` (``__main__``; started detached by ``trio-agent
serve --daemon``, ``_command``) listens on ``DIR/daemon.sock``; the thin client
(``_trio_agent_launch``) sends it ``run`` requests with its stdin, stdout and stderr.

Theory of operation. A request's *configuration key* is everything the command reads
before it sends the prompt: the argv with the prompt taken out, the working directory,
and the environment but for the variables that only describe the terminal session
(``_pool.VOLATILE``), and without ``OPENAI_API_KEY`` the Codex login file's
identity (a refreshed login is a new key). That covers the model, the API base and
transport, the workspace, the sandbox and approval options, the instructions and the
credentials. (``AGENTS.md`` and the environment context are as of the prompt's
arrival, as in-process: the runner re-reads them when an ``AGENTS.md`` changed since
it gathered them.) For each key the daemon keeps up to ``SPARES_PER_KEY`` (2)
*spares*: worker processes (``_worker``) that ran the CLI's own ``run`` code up to
the prompt -- agent open, socket warmed -- and wait.

- A request whose key has a ready spare takes it: the daemon hands the worker the
  prompt, the client's environment and descriptors, answers ``ok``, forwards the
  client's signals to the worker (``kill``) and finally sends ``exit N``. The output
  never passes through the daemon. The taken spare's replacement starts at once,
  ahead of demand: a spare takes about 0.3 s to import and warm, longer than the
  gap between two runs typed or scripted back to back, so a replacement started
  when the run ended was ready too late for the next one (9 of 10 back-to-back runs
  fell back). With two per key, the next run finds the second spare ready while the
  first one's replacement warms up.
- A spare still starting is waited for (it started earlier than any fallback could).
- No spare: the daemon answers ``fallback`` at once, the client runs in-process, and
  the daemon starts the key's spares for next time. A worker that fails before it is ready
  (a bad option: the in-process run shows the error) marks its key as failing for
  ``FAILED_FOR`` (30) seconds, during which its requests fall back without a worker.
- A client that goes away cancels its run (``detach``), never the daemon.

Bounds (``_pool``): at most ``MAX_SPARES`` (4) spares in all, ready or starting, or
``TRIO_AGENT_DAEMON_SPARES`` when the daemon starts; at most ``SPARES_PER_KEY`` (2, or
``TRIO_AGENT_DAEMON_SPARES_PER_KEY``, capped by the former) per key. Workers running a
client's turn are not spares. At the bound, starting one more closes the least recently
used ready spare of another key, or, when there is none, starts none (the key's next
run tops it up). A spare unused for ``SPARE_IDLE`` (15 minutes, or
``TRIO_AGENT_DAEMON_IDLE`` seconds) is closed.
Workers serve one run each, so no state carries from one run to the next.

Concurrency: one Trio nursery holds the accept loop, one task per client connection,
one task per worker process (which owns it: spawn, messages, exit) and the idle
reaper. ``stop`` (or SIGTERM/SIGINT) removes the socket file first, so new clients
fall back, then closes every spare cleanly and cancels running turns (SIGTERM, as if
the user had sent it: the client prints the cancelled line and exits 143), waits
for every worker -- bounded by ``CLOSE_GRACE`` (10 s), then killed -- and ends.
A ``daemon.lock`` file held with ``flock`` makes a second daemon on the same
directory refuse to start.

The modules: ``_server`` (the socket, the accept loop, one task per client),
``_pool`` (the workers and spares), ``_worker`` (a worker process), ``_channel``
(lines and descriptors over a Unix socket), ``_peer`` (whom the daemon serves) and
``_command`` (``serve --daemon`` and ``--stop``). This ``__init__`` imports nothing, so
that the CLI's ``serve --daemon`` and each worker load only the modules they use.
"""
