"""The sessions of ``trio-agent run`` and ``resume``: where they live, and the line that
says how to continue one.

Theory of operation (issue 24). Every ``run`` keeps its session, as codex does: a
rollout (``trio_agent._rollout``) in the *sessions home*, ``$TRIO_AGENT_HOME``, else
``~/.trio-agent`` -- the home ``serve`` and ``exec`` already keep their threads in, so
one directory holds everything trio-agent records (codex: ``$CODEX_HOME``, else
``~/.codex``) --, as ``sessions/YYYY/MM/DD/rollout-<time>-<session id>.jsonl``, the
layout codex keeps in ``~/.codex/sessions``. ``--ephemeral`` keeps none. The file is
created when the agent opens and grows as history is committed, so a run that is
killed leaves what it committed, and ``trio-agent resume`` closes its open turn.

When the agent closes, stderr gets one line -- ``To continue this session, run
trio-agent resume ID`` -- as codex prints its ``codex resume ID``; stdout carries only
the answer (or the events, with ``--jsonl``). ``resume`` (``_resume``) finds
sessions here and in codex's home.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Mapping
from pathlib import Path

import attrs

import trio_agent as ta

__all__ = ["add_session_options", "announce_session", "codex_home", "session_config", "sessions_home"]


def sessions_home(environ: Mapping[str, str]) -> Path:
    """Where ``run`` keeps its sessions: ``$TRIO_AGENT_HOME``, else ``~/.trio-agent``."""
    return Path(environ.get("TRIO_AGENT_HOME") or Path.home() / ".trio-agent").expanduser()


def codex_home(environ: Mapping[str, str]) -> Path:
    """Codex's home, whose ``sessions`` ``resume ID`` also looks in: ``$CODEX_HOME``, else ``~/.codex``."""
    return Path(environ.get("CODEX_HOME") or Path.home() / ".codex").expanduser()


def add_session_options(run: argparse.ArgumentParser) -> None:
    run.add_argument("--ephemeral", action="store_true",
                     help="keep no session (by default each run keeps one in $TRIO_AGENT_HOME, else ~/.trio-agent, "
                          "for trio-agent resume)")


def session_config(config: ta.AgentConfig, args: argparse.Namespace) -> ta.AgentConfig:
    """``config`` with the command's session: the resumed one (``args.durable``, set by
    ``_resume``), none with ``--ephemeral``, else a new one in the sessions home.
    ``ConfigError`` when the resumed session does not fit (the CLI prints it, exit 2)."""
    durable: ta.DurableSession | None = getattr(args, "durable", None)
    if durable is not None:
        try:
            return durable.resume_config(config)
        except (ta.InvalidSessionSnapshot, ta.WorkspaceChanged) as exc:
            raise ta.ConfigError(f"cannot resume session {durable.thread_id}: {exc}") from exc
    if getattr(args, "ephemeral", False):
        return config
    return attrs.evolve(config, rollout=ta.RolloutConfig(sessions_home(os.environ)))


def announce_session(config: ta.AgentConfig) -> None:
    """The one stderr line naming the session and how to resume it (none for an ephemeral run)."""
    if config.rollout is not None:
        print(f"To continue this session, run trio-agent resume {config.session_id}", file=sys.stderr, flush=True)
