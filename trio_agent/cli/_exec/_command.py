"""``trio-agent exec``: one turn per process, printing codex exec's JSONL.

The command line is ``codex exec``'s, as ``@openai/codex-sdk`` builds it::

    trio-agent exec [--json|--experimental-json] [-c key=value]... [-m MODEL] [-s MODE]
                    [-C DIR] [--add-dir DIR]... [--skip-git-repo-check] [--output-schema FILE]
                    [-i FILE]... [PROMPT | resume (THREAD_ID | --last) [PROMPT]]

The prompt is the argument, else stdin (read to its end; ``-`` forces stdin); a prompt
argument with piped stdin gets that input appended in a ``<stdin>`` block, as codex
does. ``resume THREAD_ID`` continues a thread of the same home in this new process --
one that ``exec`` or ``trio-agent serve`` started -- and ``resume --last`` the most
recently updated one of this directory (``--all``: of any). Threads, rollouts and
thread records live under ``--home`` (default ``$TRIO_AGENT_HOME``, else
``~/.trio-agent``), shared with ``trio-agent serve``.

How it runs: an in-process app server (``_serve``) with one in-memory client
connection (``_session``), whose notifications become the exec events
(``_events``) -- the same threads and items ``serve`` shows.

Options and what they do here:

- ``-m/--model``, ``-s/--sandbox`` (read-only, workspace-write, danger-full-access;
  default: trio-agent's, workspace-write where Bubblewrap works), ``-C/--cd`` (the new
  thread's workspace; a resumed thread keeps its own), ``--add-dir`` (one more
  writable root of workspace-write, implying it; nothing to add under
  danger-full-access), ``-i/--image`` (sent as ``localImage`` input before the
  prompt), ``--output-schema FILE`` (a JSON schema, sent as ``turn/start``'s
  ``outputSchema``), ``--ephemeral`` (no rollout: the thread cannot be resumed),
  ``-o/--output-last-message FILE`` (the final answer, written at the end),
  ``--full-auto`` (= ``-s workspace-write``), ``--dangerously-bypass-approvals-and-sandbox``
  (= ``-s danger-full-access``).
- ``--skip-git-repo-check`` is accepted and changes nothing: codex exec refuses to run
  outside a Git repository without it; trio-agent exec never asks for one (the
  sandbox, not the repository, bounds what commands may write).
- ``--thread-source``, ``--cyber-access-program`` and ``--color`` are accepted for
  codex compatibility and ignored (said once on stderr).
- The approval policy is ``never`` unless ``-c approval_policy=...`` says otherwise;
  nobody can answer an approval in exec, so any request to ask is refused (denied).
- The model: ``CODEX_API_KEY`` (the key codex exec reads), else ``OPENAI_API_KEY``,
  else an existing Codex login; without any, the built-in local scripted model, said
  on stderr. ``OPENAI_BASE_URL`` or ``-c openai_base_url=URL`` (or ``--api-base``)
  point it at another Responses endpoint.

Exit status: 0 when the turn completed; 1 when it failed (``turn.failed``) or could
not start (an ``error`` event, and the reason on stderr); 2 for a bad command line;
128 + the signal when SIGINT/SIGTERM interrupted it (``_session``).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ... import __version__
from ..._codex_config import CodexConfigError, CodexSettings, WebSearch, parse_overrides
from ..._tools._security import ApprovalPolicy
from .._connection import add_connection_options, connection_settings
from ._session import ExecRequest

__all__ = ["exec_main", "exec_parser"]

Json = dict[str, Any]
_SANDBOXES = ("read-only", "workspace-write", "danger-full-access")
_ENVIRONMENT = """environment variables:
  CODEX_API_KEY     the model's API key (as codex exec reads it), before OPENAI_API_KEY; with
                    neither (and no Codex login) the built-in local scripted model answers
  OPENAI_BASE_URL   the Responses API base URL (also -c openai_base_url=URL, --api-base)
  TRIO_AGENT_HOME   default of --home
exit status: 0 completed, 1 the turn failed or could not start, 2 a bad command line,
  130/143 interrupted by SIGINT/SIGTERM (the turn ends with turn.failed)"""


def exec_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="trio-agent exec", formatter_class=argparse.RawDescriptionHelpFormatter, allow_abbrev=False,
        description="Run one turn and print its events; codex exec's command line and --json output "
                    "(what @openai/codex-sdk runs). The prompt is PROMPT, else stdin.",
        epilog="resume: `trio-agent exec [OPTIONS] resume THREAD_ID [PROMPT]` continues a thread of --home "
               "(--last: the latest of this directory; --all: of any directory).\n\n" + _ENVIRONMENT)
    parser.add_argument("words", nargs="*", metavar="PROMPT | resume THREAD_ID [PROMPT]",
                        help="what to ask (- or nothing: read stdin)")
    parser.add_argument("--json", "--experimental-json", dest="json", action="store_true",
                        help="print every event as one JSON object per line (codex exec's JSONL)")
    parser.add_argument("-c", "--config", action="append", default=[], metavar="KEY=VALUE",
                        help="a codex config override (TOML value); keys trio-agent does not use are named on stderr")
    parser.add_argument("-m", "--model", default=None, help="the model of a new thread (default: gpt-5.5)")
    parser.add_argument("-s", "--sandbox", choices=_SANDBOXES, default=None, help="how commands are confined")
    parser.add_argument("-C", "--cd", default=None, metavar="DIR", help="the workspace of a new thread (default: .)")
    parser.add_argument("--add-dir", action="append", default=[], metavar="DIR",
                        help="one more directory workspace-write commands may write (repeatable)")
    parser.add_argument("--skip-git-repo-check", action="store_true",
                        help="accepted for codex compatibility; trio-agent exec never requires a Git repository")
    parser.add_argument("--output-schema", default=None, metavar="FILE",
                        help="a JSON schema the final answer must follow (turn/start outputSchema)")
    parser.add_argument("-i", "--image", action="append", default=[], metavar="FILE",
                        help="attach an image to the prompt (repeatable; FILE,FILE also works)")
    parser.add_argument("--ephemeral", action="store_true", help="keep no rollout (the thread cannot be resumed)")
    parser.add_argument("-o", "--output-last-message", default=None, metavar="FILE",
                        help="write the final answer to FILE")
    parser.add_argument("--full-auto", action="store_true", help="same as --sandbox workspace-write")
    parser.add_argument("--dangerously-bypass-approvals-and-sandbox", "--yolo", dest="yolo", action="store_true",
                        help="same as --sandbox danger-full-access")
    parser.add_argument("--last", action="store_true", help="resume: the most recently updated thread")
    parser.add_argument("--all", action="store_true", help="resume --last: of any directory, not only this one")
    for flag in ("--thread-source", "--cyber-access-program", "--color"):
        parser.add_argument(flag, default=None, help="accepted for codex compatibility; ignored")
    parser.add_argument("--local", action="store_true", help="use the built-in local scripted model")
    parser.add_argument("--home", default=None, metavar="DIR",
                        help="where threads live (default: $TRIO_AGENT_HOME or ~/.trio-agent), shared with serve")
    add_connection_options(parser)
    return parser


class ExecArgs:
    """The parsed command line, with the prompt's source worked out."""

    def __init__(self, parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
        self.parser = parser
        self.args = args
        words: list[str] = list(args.words)
        self.resume: str | None = None
        self.resume_last = bool(args.last)
        if words[:1] == ["resume"]:
            words = words[1:]
            if not self.resume_last:
                if not words:
                    parser.error("resume needs the THREAD_ID to continue (or --last for the latest thread)")
                self.resume = words.pop(0)
        elif self.resume_last or args.all:
            parser.error("--last and --all go with resume: trio-agent exec resume --last [PROMPT]")
        if len(words) > 1:
            parser.error(f"give the prompt as one argument (quote it), got {len(words)}: {' '.join(words)!r}")
        self.prompt_arg = words[0] if words else None


def _decode(data: bytes, parser: argparse.ArgumentParser) -> str:
    data = data.removeprefix(b"\xef\xbb\xbf")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        parser.error(f"stdin is not UTF-8 (invalid byte at offset {exc.start}); convert it, e.g. "
                     "iconv -f ENCODING -t UTF-8")


def read_prompt(parser: argparse.ArgumentParser, prompt_arg: str | None, stdin: Any) -> str:
    """The prompt: ``prompt_arg``, else all of ``stdin`` (a terminal is refused: say it
    as an argument); an argument with piped stdin gets it appended as ``<stdin>``."""
    tty = stdin.isatty()
    if prompt_arg is None or prompt_arg == "-":
        if tty and prompt_arg is None:
            parser.error("no prompt: give it as an argument, or pipe it into stdin")
        if prompt_arg is None:
            print("Reading prompt from stdin...", file=sys.stderr, flush=True)
        text = _decode(stdin.buffer.read(), parser)
        if not text.strip():
            parser.error("no prompt: stdin was empty; give the prompt as an argument or on stdin")
        return text
    if tty:
        return prompt_arg
    extra = _decode(stdin.buffer.read(), parser)
    if not extra.strip():
        return prompt_arg
    return f"{prompt_arg}\n\n<stdin>\n{extra}{'' if extra.endswith(chr(10)) else chr(10)}</stdin>"


def _directory(parser: argparse.ArgumentParser, flag: str, value: str) -> str:
    path = os.path.realpath(os.path.expanduser(value))
    if not os.path.isdir(path):
        parser.error(f"{flag} {value!r} is not an existing directory")
    return path


def _schema(parser: argparse.ArgumentParser, value: str | None) -> Json | None:
    if value is None:
        return None
    try:
        schema = json.loads(Path(value).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        parser.error(f"--output-schema {value!r}: cannot read it ({exc.__class__.__name__}: {exc})")
    except ValueError as exc:
        parser.error(f"--output-schema {value!r} is not valid JSON ({exc})")
    if not isinstance(schema, dict):
        parser.error(f"--output-schema {value!r} must hold a JSON object (a JSON schema)")
    return schema


def _images(values: Sequence[str]) -> tuple[str, ...]:
    paths = [part for value in values for part in value.split(",") if part]
    return tuple(os.path.abspath(os.path.expanduser(path)) for path in paths)


def _sandbox(args: argparse.Namespace, settings: CodexSettings) -> str | None:
    """The flags win over ``-c sandbox_mode`` (as codex's harness overrides do)."""
    if args.yolo:
        return "danger-full-access"
    if args.sandbox is not None:
        sandbox: str = args.sandbox
        return sandbox
    if args.full_auto:
        return "workspace-write"
    return settings.sandbox_mode.value if settings.sandbox_mode is not None else None


def _note(message: str) -> None:
    print(f"trio-agent exec: {message}", file=sys.stderr, flush=True)


def _approval(settings: CodexSettings) -> str:
    """``-c approval_policy`` (default ``never``, as codex exec's). Nobody can answer in
    exec, so ``on-failure`` (ask after a sandboxed failure) behaves as ``never``: it is
    sent as that, and said."""
    policy = settings.approval_policy
    if policy is ApprovalPolicy.ON_FAILURE:
        _note("approval_policy=on-failure: exec cannot ask anyone, so a failed command stays failed, as under "
              "never (sent as never)")
        return "never"
    return policy.value if policy is not None else "never"


def _config_notes(settings: CodexSettings, resuming: bool) -> None:
    """One stderr line for each ``-c`` setting exec takes but cannot apply."""
    if settings.ignored_message() is not None:
        print(settings.ignored_message(), file=sys.stderr, flush=True)
    if settings.web_search is WebSearch.CACHED:
        _note("web_search=cached: trio-agent has no cached search index, so the thread has no web search tool")
    if resuming and (settings.instructions is not None or settings.developer_instructions is not None):
        _note("instructions and developer_instructions apply to new threads; a resumed thread keeps its own")


def _roots(parser: argparse.ArgumentParser, args: argparse.Namespace, settings: CodexSettings,
           cwd: str) -> tuple[str, ...]:
    """``--add-dir`` and ``-c sandbox_workspace_write.writable_roots`` (relative to the workspace)."""
    roots = [_directory(parser, "--add-dir", value) for value in args.add_dir]
    for root in settings.writable_roots or ():
        roots.append(_directory(parser, "-c sandbox_workspace_write.writable_roots",
                                str(root if root.is_absolute() else Path(cwd) / root)))
    return tuple(dict.fromkeys(roots))


def codex_settings(parser: argparse.ArgumentParser, overrides: Sequence[str]) -> CodexSettings:
    """The ``-c`` overrides (``parser.error``, exit 2, for a bad one)."""
    try:
        return parse_overrides(overrides)
    except CodexConfigError as exc:
        parser.error(str(exc))


def build_request(exec_args: ExecArgs, settings: CodexSettings, stdin: Any,
                  environ: Mapping[str, str]) -> ExecRequest:
    """The ``ExecRequest`` of a parsed command line and its ``-c`` settings
    (``parser.error``, exit 2, when bad)."""
    parser, args = exec_args.parser, exec_args.args
    cwd = _directory(parser, "--cd", args.cd) if args.cd is not None else os.path.realpath(os.getcwd())
    roots = _roots(parser, args, settings, cwd)
    sandbox = _sandbox(args, settings)
    if roots and sandbox == "read-only":
        _note("--add-dir has no effect with --sandbox read-only (nothing is writable)")
    for flag in ("thread_source", "cyber_access_program", "color"):
        if getattr(args, flag) is not None:
            _note(f"--{flag.replace('_', '-')} is accepted for codex compatibility and ignored")
    resuming = exec_args.resume is not None or exec_args.resume_last
    _config_notes(settings, resuming)
    schema = _schema(parser, args.output_schema)
    prompt = read_prompt(parser, exec_args.prompt_arg, stdin)
    originator = environ.get("CODEX_INTERNAL_ORIGINATOR_OVERRIDE", "").strip() or "trio_agent_exec"
    effort = settings.reasoning_effort
    return ExecRequest(
        prompt=prompt, images=_images(args.image), resume=exec_args.resume, resume_last=exec_args.resume_last,
        resume_all=bool(args.all), cwd=cwd, cd_given=args.cd is not None, model=args.model or settings.model,
        sandbox=sandbox, writable_roots=roots, network_access=settings.network_access, approval=_approval(settings),
        effort=effort.value if effort is not None else None, output_schema=schema, ephemeral=bool(args.ephemeral),
        instructions=settings.instructions, developer_instructions=settings.developer_instructions,
        web_search=settings.web_search is None or settings.web_search is WebSearch.LIVE,
        client_name=originator, version=__version__,
    )


def model_environ(parser: argparse.ArgumentParser, args: argparse.Namespace, settings: CodexSettings,
                  environ: Mapping[str, str]) -> dict[str, str]:
    """The environment the model connection is read from: the key of ``-c
    model_providers.<id>.env_key`` when the chosen provider names one, else
    ``CODEX_API_KEY`` (the key codex exec reads), else ``OPENAI_API_KEY``; the base URL
    of ``-c openai_base_url`` (or the provider's) unless ``--api-base`` is given."""
    env = dict(environ)
    key_env = settings.api_key_env
    if key_env is not None:
        key = env.get(key_env, "").strip()
        if not key:
            parser.error(f"-c model_providers.{settings.model_provider}.env_key={key_env}: ${key_env} is not set; "
                         "export the provider's API key there")
        env["OPENAI_API_KEY"] = key
    elif env.get("CODEX_API_KEY", "").strip():
        env["OPENAI_API_KEY"] = env["CODEX_API_KEY"].strip()
    if settings.base_url is not None and args.api_base is None:
        args.api_base = settings.base_url
    return env


def _home(args: argparse.Namespace, environ: Mapping[str, str]) -> Path:
    return Path(args.home or environ.get("TRIO_AGENT_HOME") or Path.home() / ".trio-agent").expanduser()


def exec_main(argv: list[str], environ: Mapping[str, str] | None = None) -> int:
    """``trio-agent exec ARGV``; returns the exit status."""
    env = dict(os.environ if environ is None else environ)
    parser = exec_parser()
    exec_args = ExecArgs(parser, parser.parse_intermixed_args(argv))
    args = exec_args.args
    settings = codex_settings(parser, args.config)
    connection = connection_settings(parser, args, model_environ(parser, args, settings, env))
    request = build_request(exec_args, settings, sys.stdin, env)
    from ._run import run_exec

    return run_exec(request, connection, home=_home(args, env), json_mode=bool(args.json),
                    last_message_file=args.output_last_message)
