"""The ``trio-agent`` command line. Its public face is :func:`main` alone (what the
console script, ``_trio_agent_launch``, runs when no warm daemon takes the command);
every module in this package is private to it and may change without notice.

The rooms: ``_main`` (the parser, and the dispatch to each command); ``run`` --
``_run`` (the command), ``_run_options`` (its options), ``_codex`` (codex's spellings of
them), ``_prompt`` (the prompt from stdin), ``_output`` (human and JSONL output),
``_approval_prompt`` (asking on the terminal), ``_sessions`` and ``_resume`` (kept
sessions and ``resume``); for every command: ``_connection`` (the model connection and
its credential), ``_signals`` (Ctrl-C and SIGTERM) and ``_parser`` (argparse without
abbreviations); ``_app_server`` and ``_serve_options`` (``app-server``, the app
server's listener), ``_replay`` (``--record`` and ``replay``), ``_exec`` (codex exec's
command line) and ``_bench`` (``trio-agent bench``). ``serve`` itself is the
``_serve`` package's, and ``serve --daemon`` the ``_daemon`` package's.

Start-up latency is part of the product, so this ``__init__`` imports nothing: the
command line's modules load on the first read of :func:`main` (PEP 562), and a module
that needs a few of them (``serve``'s, the benchmark's child-process server) loads no
more.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ._main import main

__all__ = ["main"]


def __getattr__(name: str) -> Any:
    if name == "main":
        from ._main import main

        return main
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
