"""``trio-agent resume [--last | ID] [PROMPT]``: one more turn of a kept session.

Theory of operation (issue 24). ``resume`` is ``run`` continuing a session: it takes
run's options (model, sandbox, approvals, tools, ``--local``, ``--jsonl``/``--json``,
``-C``, ``-c``) but not ``--ephemeral`` (the session's file is continued), and runs the
very same command (``_run``) once :func:`prepare_resume` has found and loaded the
session (``args.durable``; ``_sessions.session_config`` turns it into the agent's
config with ``DurableSession.resume_config``).

Which session:

- ``--last``: the most recently written session in the sessions home
  (``_sessions.sessions_home``); none there is one line, exit 2.
- ``ID``: a session id of the sessions home, else of codex's (``$CODEX_HOME``, else
  ``~/.codex``): codex's sessions are continued in their own file, which stays
  resumable by codex (``trio_agent._rollout``: ordinals in paginated files).
- a path (it holds a ``/`` or ends in ``.jsonl``): that rollout file, which must lie in a
  home's ``sessions/YYYY/MM/DD/`` (``RolloutConfig.load_file``).

An id is checked before it names anything (``session_id_problem``: no separators,
``..`` or glob characters), so ``../../x`` can only be a path, which must then name a
rollout file in a home. An unknown id is one line naming where it looked, exit 2; so is
a damaged file (``InvalidSessionSnapshot`` names the line) and one larger than
:data:`MAX_SESSION_BYTES`, which is refused before it is read.

What the user no longer has to know: the workspace is the one the session recorded
while it is a directory, else the current one with one notice on stderr (or ``-C
DIR``: the session moves there); the instructions are the session's own (a codex
session's base prompt), ``--instructions`` is noted and not used; the model is the one
the session recorded unless ``-m`` says otherwise (codex records none in the file:
then run's default).
"""

from __future__ import annotations

import argparse
import os
import sys
import warnings
from collections.abc import Mapping
from pathlib import Path

import trio_agent as ta

from .._ids import session_id_problem
from ._parser import SubcommandParser, refuse
from ._sessions import codex_home, sessions_home

__all__ = ["MAX_SESSION_BYTES", "add_resume_command", "prepare_resume"]

#: The largest rollout ``resume`` reads (it loads the whole file): 256 MiB, far more than
#: any context window holds, even with the history compactions replaced.
MAX_SESSION_BYTES = 256 << 20
_NOT_COPIED = ("prompt", "ephemeral")  # run's, not resume's
_CHUNK = 1 << 16  # what _more_than_one_line reads at a time


def add_resume_command(sub: argparse._SubParsersAction[SubcommandParser],
                       run: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """The ``resume`` subcommand, with ``run``'s options (the same declarations)."""
    resume = sub.add_parser(
        "resume", add_help=False, help="continue a kept session (trio-agent's, or codex's) with one more prompt",
        usage="%(prog)s [options] [--last | ID] [PROMPT | -]", epilog=run.epilog,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Continue a session that trio-agent run kept (or a codex session) with one more prompt, in "
                    "the session's own directory and with its own instructions. Takes run's options.")
    groups = {group.title: group for group in resume._action_groups}
    for group in run._action_groups:
        target = groups.get(group.title) or resume.add_argument_group(group.title, group.description)
        for action in group._group_actions:
            if action.dest not in _NOT_COPIED:
                target._add_action(action)
    resume.add_argument("session", nargs="?", default=None, metavar="ID",
                        help="the session: its id (in $TRIO_AGENT_HOME, else in $CODEX_HOME) or its rollout file")
    resume.add_argument("prompt", nargs="?", default=None, metavar="PROMPT",
                        help="what to ask next; - (or nothing, with stdin not a terminal): read it from stdin")
    resume.add_argument("--last", action="store_true", help="the most recent session of $TRIO_AGENT_HOME")
    resume.set_defaults(command_parser=resume)
    return resume


def prepare_resume(parser: argparse.ArgumentParser, args: argparse.Namespace, environ: Mapping[str, str]) -> None:
    """Find and load the session ``args`` names into ``args.durable`` (and its model into
    ``args.model``); one line and exit 2 when there is none to resume."""
    if args.last:
        if args.prompt is not None:
            refuse(parser.prog, f"--last resumes the latest session, so it takes no ID ({args.session!r:.80}); "
                                "give either --last or an ID, then the prompt")
        args.prompt, args.session = args.session, None
    elif args.session is None:
        refuse(parser.prog, "which session? give its ID (printed when it ended), or --last for the latest")
    path = _find(parser, args, environ)
    size = path.stat().st_size
    if size > MAX_SESSION_BYTES:
        refuse(parser.prog, f"the session file {path} is {size >> 20} MiB, more than resume reads "
                            f"({MAX_SESSION_BYTES >> 20} MiB); start a new session")
    durable = _load(parser, path)
    if args.workspace is not None:
        durable = durable.in_workspace(args.workspace)
    elif not Path(durable.workspace or ".").is_dir() or not durable.workspace:
        recorded = durable.workspace or "(none recorded)"
        durable = durable.in_workspace(Path.cwd())
        print(f"trio-agent: the session's directory {recorded} does not exist; resuming in {durable.workspace} "
              "(-C DIR to choose)", file=sys.stderr, flush=True)
    args.workspace = Path(durable.workspace)
    if args.instructions is not None:
        print("trio-agent: --instructions applies to new sessions; a resumed session keeps its own",
              file=sys.stderr, flush=True)
    if args.model is None and durable.snapshot.model:
        args.model = durable.snapshot.model
    args.durable = durable


def _find(parser: argparse.ArgumentParser, args: argparse.Namespace, environ: Mapping[str, str]) -> Path:
    """The session's rollout file (``load_file`` derives its home from where it is)."""
    ours = sessions_home(environ)
    if args.session is None:  # --last
        latest = _latest(ours)
        if latest is None:
            refuse(parser.prog, f"no session to resume in {ours / 'sessions'} (trio-agent run keeps one per run, "
                                "unless --ephemeral; TRIO_AGENT_HOME sets where)")
        return latest
    ref: str = args.session
    if os.sep in ref or ref.endswith(".jsonl"):
        path = Path(ref).expanduser()
        if not path.is_file():
            refuse(parser.prog, f"no rollout file {ref!r:.200}; give an existing session file or a session ID")
        return path
    problem = session_id_problem(ref)
    if problem is not None:
        refuse(parser.prog, f"{ref!r:.80} is not a session ID ({problem}); give the ID trio-agent printed, or --last")
    homes = (ours, codex_home(environ))
    for home in homes:
        found = ta.RolloutConfig(home).find(ref)
        if found is not None:
            return found
    where = " or ".join(str(home / "sessions") for home in homes)
    refuse(parser.prog, f"no session {ref} in {where}; check the ID, or resume --last")


def _latest(home: Path) -> Path | None:
    """The most recently written rollout file of ``home`` that holds more than its
    ``session_meta`` line (an agent opened and never prompted -- a warm daemon's spare --
    leaves only that)."""
    found: list[tuple[float, Path]] = []
    for path in (home / "sessions").glob("*/*/*/rollout-*.jsonl"):
        try:
            found.append((path.stat().st_mtime, path))
        except OSError:
            continue
    for _, path in sorted(found, reverse=True):
        if _more_than_one_line(path):
            return path
    return None


def _more_than_one_line(path: Path) -> bool:
    """Whether anything follows the file's first line (read as far as its end)."""
    try:
        with path.open("rb") as file:
            size = os.fstat(file.fileno()).st_size
            offset = 0
            while chunk := file.read(_CHUNK):
                newline = chunk.find(b"\n")
                if newline >= 0:
                    return offset + newline + 1 < size
                offset += len(chunk)
    except OSError:
        pass
    return False


def _load(parser: argparse.ArgumentParser, path: Path) -> ta.DurableSession:
    """The session of ``path``; its problems as one line each (a torn last line: a
    notice; damage: exit 2)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ta.RolloutWarning)
        try:
            durable = ta.RolloutConfig.load_file(path)
        except (ta.InvalidSessionSnapshot, ta.RolloutError) as exc:
            refuse(parser.prog, str(exc))
    for warning in caught:
        print(f"trio-agent: {warning.message}", file=sys.stderr, flush=True)
    if caught:  # the writer cuts that torn line off, and would say so once more
        warnings.filterwarnings("ignore", category=ta.RolloutWarning, message=".*cut it off before appending")
    return durable
