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
it gathered them.) For each key the daemon keeps at most one *spare*: a worker
process (``_worker``) that ran the CLI's own ``run`` code up to the prompt --
agent open, socket warmed -- and waits.

- A request whose key has a ready spare takes it: the daemon hands the worker the
  prompt, the client's environment and descriptors, answers ``ok``, forwards the
  client's signals to the worker (``kill``) and finally sends ``exit N``. The output
  never passes through the daemon. When the worker has exited, the daemon starts the
  next spare for that key -- after the run, so that it does not compete with the
  turn for the CPU.
- A spare still starting is waited for (it started earlier than any fallback could).
- No spare: the daemon answers ``fallback`` at once, the client runs in-process, and
  the daemon starts a spare for next time. A worker that fails before it is ready
  (a bad option: the in-process run shows the error) marks its key as failing for
  ``FAILED_FOR`` (30) seconds, during which its requests fall back without a worker.
- A client that goes away cancels its run (``detach``), never the daemon.

Bounds (``_pool``): at most ``MAX_SPARES`` (4) spares, or
``TRIO_AGENT_DAEMON_SPARES`` when the daemon starts; starting one more closes the least
recently used ready one. A spare unused for ``SPARE_IDLE`` (15 minutes, or
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
