"""From ``exec_command``/``write_stdin`` arguments to what a command is started with.

Argument parsing (:func:`parse_exec_args`, :func:`parse_write_args`) validates and clamps
the tool arguments into frozen requests (``nanocodex.md`` sec. 5.3) and raises
:class:`ShellError` with a message meant for the model.

Environment (``nanocodex.md`` sec. 5.4): a command inherits the agent's environment minus
anything that looks like a credential (:func:`is_secret_name`, :func:`url_credentials`):

* a name one of whose ``_``-separated parts (upper-cased) is in
  :data:`SECRET_NAME_PARTS` (``GITHUB_TOKEN``, ``MY_API_KEY``, ``DB_PASSWORD``,
  ``SENTRY_DSN``; ``KEYBOARD`` is kept), or ends with one of
  :data:`SECRET_NAME_SUFFIXES` (``PGPASSWORD``, ``NGROK_AUTHTOKEN``, ``X_APIKEY``;
  ``PASSWORDLESS`` and ``TOKENIZER_DIR`` are kept), or has a ``PWD`` part besides
  others (``MYSQL_PWD``; ``PWD`` and ``OLDPWD`` are kept), or is in
  :data:`WELL_KNOWN_SECRET_NAMES`;
* whatever its name, a value holding a URL with a password in it
  (``scheme://user:password@host``: ``DATABASE_URL``, ``REDIS_URL``, an
  ``HTTPS_PROXY`` with credentials). Pass such a variable through ``env_overrides``
  if a command really needs it.

The values of the dropped variables -- and, for URLs, the ``user:password`` part and
the password alone, raw and percent-decoded -- that are at least
:data:`MIN_REDACTED_LENGTH` characters long are redacted from everything the command
prints, in case it finds them another way (a dotfile, ``/proc``, the command line
itself). Then :data:`FORCED_ENV` makes output plain (no colour, no pager, UTF-8) and
the caller's overrides are applied last (they are neither scrubbed nor redacted).

Everything here is synchronous and cheap (a couple of ``stat`` calls at most).
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import cast
from urllib.parse import unquote

import attrs

from .._errors import AgentError

__all__ = [
    "BYTES_PER_TOKEN",
    "EXEC_ARGUMENTS",
    "FORCED_ENV",
    "MAX_TERMINAL_DIMENSION",
    "MIN_REDACTED_LENGTH",
    "REDACTED",
    "SANDBOX_PERMISSIONS",
    "SECRET_NAME_PARTS",
    "SECRET_NAME_SUFFIXES",
    "WELL_KNOWN_SECRET_NAMES",
    "WRITE_ARGUMENTS",
    "ExecRequest",
    "ShellEnvironment",
    "ShellError",
    "WriteRequest",
    "build_environment",
    "is_secret_name",
    "parse_exec_args",
    "parse_write_args",
    "redact",
    "resolve_shell",
    "shell_argv",
    "url_credentials",
    "workdir_problem",
]

SECRET_NAME_PARTS = frozenset(
    {
        "APIKEY",
        "AUTH",
        "AUTHORIZATION",
        "COOKIE",
        "CREDENTIAL",
        "CREDENTIALS",
        "DSN",  # SENTRY_DSN, DATABASE_DSN: connection strings with keys in them
        "JWT",
        "KEY",
        "PASS",
        "PASSPHRASE",
        "PASSWD",
        "PASSWORD",
        "PAT",  # GITHUB_PAT: personal access tokens
        "SECRET",
        "TOKEN",
        "WEBHOOK",  # SLACK_WEBHOOK_URL: the URL is the credential
    }
)
#: A name part ending with one of these names a credential even without a ``_`` before it.
SECRET_NAME_SUFFIXES = ("APIKEY", "PASSWORD", "PASSWD", "SECRET", "TOKEN")
#: Credentials by the names their clients document (some of which the rules above also catch).
WELL_KNOWN_SECRET_NAMES = frozenset({"MYSQL_PWD", "PGPASSWORD", "SONAR_LOGIN", "SSHPASS"})
#: ``scheme://user:password@``; the password is what follows the first ``:`` of the userinfo.
_URL_WITH_PASSWORD = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://(?P<user>[^\s/?#:@]*):(?P<password>[^\s/?#@]+)@")

#: Shorter values are not redacted: they would blank out ordinary words and numbers.
MIN_REDACTED_LENGTH = 8
REDACTED = "[REDACTED]"

#: Plain, pager-free, colourless UTF-8 output for every command.
FORCED_ENV: Mapping[str, str] = {
    "NO_COLOR": "1",
    "TERM": "dumb",
    "LANG": "C.UTF-8",
    "LC_CTYPE": "C.UTF-8",
    "LC_ALL": "C.UTF-8",
    "COLORTERM": "",
    "PAGER": "cat",
    "GIT_PAGER": "cat",
    "GH_PAGER": "cat",
}

#: ``$SHELL`` is honoured only when its basename is one of these.
SUPPORTED_SHELLS = frozenset({"bash", "zsh", "sh"})
_FALLBACK_SHELLS = ("/bin/bash", "/bin/sh")


def is_secret_name(name: str) -> bool:
    """Whether an environment variable name looks like it holds a credential."""
    upper = name.upper()
    parts = upper.split("_")
    return (
        upper in WELL_KNOWN_SECRET_NAMES
        or not SECRET_NAME_PARTS.isdisjoint(parts)
        or any(part.endswith(SECRET_NAME_SUFFIXES) for part in parts)
        or (len(parts) > 1 and "PWD" in parts)
    )


def url_credentials(value: str) -> tuple[str, ...]:
    """The secrets of every ``scheme://user:password@`` URL in ``value``: each
    ``user:password``, each password, and its percent-decoded form. Empty if none."""
    found: list[str] = []
    for match in _URL_WITH_PASSWORD.finditer(value):
        password = match["password"]
        found += [f"{match['user']}:{password}", password, unquote(password)]
    return tuple(dict.fromkeys(found))


@attrs.frozen
class ShellEnvironment:
    """The child's environment and the secret values to redact from its output."""

    env: Mapping[str, str]
    secrets: tuple[str, ...]


def build_environment(
    inherited: Mapping[str, str], overrides: Mapping[str, str] | None = None
) -> ShellEnvironment:
    """Scrub ``inherited``, force :data:`FORCED_ENV`, then apply ``overrides``."""
    env: dict[str, str] = {}
    secrets: set[str] = set()
    for name, value in inherited.items():
        in_url = url_credentials(value)
        if is_secret_name(name) or in_url:
            secrets.update(secret for secret in (value, *in_url) if len(secret) >= MIN_REDACTED_LENGTH)
        else:
            env[name] = value
    env.update(FORCED_ENV)
    env.update(overrides or {})
    # Longest first, so a secret containing another one is replaced whole.
    ordered = tuple(sorted(secrets, key=lambda secret: (-len(secret), secret)))
    return ShellEnvironment(env=env, secrets=ordered)


def redact(text: str, secrets: Sequence[str]) -> str:
    """Replace every occurrence of each secret (expected longest first) by ``[REDACTED]``."""
    for secret in secrets:
        if secret:
            text = text.replace(secret, REDACTED)
    return text


def resolve_shell(requested: str | None, env_shell: str | None) -> str:
    """``requested`` if given, else ``$SHELL`` if bash/zsh/sh, else /bin/bash, else /bin/sh."""
    if requested:
        return requested
    if env_shell and os.path.basename(env_shell) in SUPPORTED_SHELLS:
        return env_shell
    for candidate in _FALLBACK_SHELLS:
        if os.access(candidate, os.X_OK):
            return candidate
    return _FALLBACK_SHELLS[-1]


def shell_argv(shell: str, cmd: str, *, login: bool) -> list[str]:
    """``[shell, "-lc", cmd]`` for a login shell, else ``[shell, "-c", cmd]``."""
    return [shell, "-lc" if login else "-c", cmd]


def workdir_problem(workdir: Path) -> str | None:
    """Why a command cannot start in ``workdir``, or ``None`` if it can."""
    if not workdir.exists():
        return f"workdir {workdir} does not exist"
    if not workdir.is_dir():
        return f"workdir {workdir} is not a directory"
    return None


# -- tool arguments ----------------------------------------------------------------------------


class ShellError(AgentError):
    """A tool-level error of ``exec_command``/``write_stdin``: bad arguments, an unknown
    ``session_id``, undeliverable stdin, or sessions that are closed or all busy.

    Failing to *start* a command (missing workdir, missing shell) is not an error: it
    is reported as a result with ``exit_code`` 1, as nanocodex does.
    """


EXEC_YIELD_MS = (10_000, 250, 30_000)  # (default, min, max)
WRITE_YIELD_MS = (250, 250, 30_000)
POLL_YIELD_MS = (5_000, 5_000, 300_000)
DEFAULT_MAX_OUTPUT_TOKENS = 10_000
BYTES_PER_TOKEN = 4
#: Returned output never exceeds the capture buffer (nanocodex: at most 1 MiB).
MAX_OUTPUT_BYTES = 1024 * 1024


#: ``sandbox_permissions`` values (codex's): the default, or a request to run outside the sandbox.
SANDBOX_PERMISSIONS = ("use_default", "require_escalated")


@attrs.frozen
class ExecRequest:
    cmd: str
    workdir: Path
    shell: str | None
    login: bool
    yield_seconds: float
    max_bytes: int
    escalate: bool = False  # sandbox_permissions: "require_escalated"
    justification: str | None = None
    tty: bool = False  # a pseudo-terminal instead of pipes (_pty.py)
    size: tuple[int, int] | None = None  # the terminal's (rows, cols); None: 24x80


@attrs.frozen
class WriteRequest:
    session_id: int
    chars: str
    yield_seconds: float
    max_bytes: int
    size: tuple[int, int] | None = None  # resize the session's terminal to (rows, cols) first


#: The arguments each tool takes (nanocodex's and codex's, plus ``size``); any other is
#: refused by name rather than ignored, as nanocodex does (``deny_unknown_fields``).
#: ``prefix_rule`` is codex's approval metadata: accepted, not acted on (as nanocodex).
EXEC_ARGUMENTS = (
    "cmd", "workdir", "shell", "login", "tty", "size", "yield_time_ms", "max_output_tokens",
    "sandbox_permissions", "justification", "prefix_rule",
)
WRITE_ARGUMENTS = ("session_id", "chars", "size", "yield_time_ms", "max_output_tokens")
#: ``struct winsize`` holds unsigned shorts.
MAX_TERMINAL_DIMENSION = 65535


def parse_exec_args(args: Mapping[str, object], workspace: Path) -> ExecRequest:
    """Validate ``exec_command`` arguments; an unknown key is refused by name.

    ``sandbox_permissions`` (``"use_default"``, ``"require_escalated"``) and
    ``justification`` are read here and acted on by the approval policy."""
    _refuse_unknown(args, "exec_command", EXEC_ARGUMENTS)
    cmd = args.get("cmd")
    if not isinstance(cmd, str) or not cmd.strip():
        raise ShellError("exec_command: 'cmd' is required and must be a non-empty string")
    workdir = _optional_str(args, "exec_command", "workdir")
    login = _bool_arg(args, "login", default=True)
    tty = _bool_arg(args, "tty", default=False)
    size = _size_arg(args, "exec_command")
    if size is not None and not tty:
        raise ShellError("exec_command: 'size' sets the terminal of a tty: true command; add \"tty\": true or drop it")
    permissions = _optional_str(args, "exec_command", "sandbox_permissions") or SANDBOX_PERMISSIONS[0]
    if permissions not in SANDBOX_PERMISSIONS:
        raise ShellError(
            f"exec_command: 'sandbox_permissions' must be \"use_default\" or \"require_escalated\", got {permissions!r}"
        )
    return ExecRequest(
        cmd=cmd,
        workdir=workspace / workdir if workdir else workspace,
        shell=_optional_str(args, "exec_command", "shell"),
        login=login,
        yield_seconds=_yield_seconds(args, "exec_command", EXEC_YIELD_MS),
        max_bytes=_max_bytes(args, "exec_command"),
        escalate=permissions == "require_escalated",
        justification=_optional_str(args, "exec_command", "justification") or None,
        tty=tty,
        size=size,
    )


def parse_write_args(args: Mapping[str, object]) -> WriteRequest:
    """Validate ``write_stdin`` arguments; an empty ``chars`` is a poll (unless it
    carries a ``size``: a resize waits as briefly as a write)."""
    _refuse_unknown(args, "write_stdin", WRITE_ARGUMENTS)
    session_id = _int_arg(args, "write_stdin", "session_id", None)
    if session_id is None:
        raise ShellError("write_stdin: 'session_id' is required (the id exec_command returned)")
    chars = _optional_str(args, "write_stdin", "chars") or ""
    size = _size_arg(args, "write_stdin")
    limits = WRITE_YIELD_MS if chars or size else POLL_YIELD_MS  # a resize is input, not a poll
    return WriteRequest(
        session_id=session_id,
        chars=chars,
        yield_seconds=_yield_seconds(args, "write_stdin", limits),
        max_bytes=_max_bytes(args, "write_stdin"),
        size=size,
    )


def _refuse_unknown(args: Mapping[str, object], tool: str, known: tuple[str, ...]) -> None:
    unknown = [str(key) for key in args if key not in known]
    if unknown:
        names = ", ".join(repr(name) for name in sorted(unknown))
        raise ShellError(
            f"{tool}: unknown argument{'s' if len(unknown) > 1 else ''} {names}; "
            f"it takes {', '.join(known)}"
        )


def _bool_arg(args: Mapping[str, object], name: str, *, default: bool) -> bool:
    value = args.get(name)
    if value is None:
        return default
    if not isinstance(value, bool):
        raise ShellError(f"exec_command: {name!r} must be true or false, got {value!r}")
    return value


def _size_arg(args: Mapping[str, object], tool: str) -> tuple[int, int] | None:
    """``size: {rows, cols}`` (codex's terminal size), each 1..65535, or None."""
    value = args.get("size")
    if value is None:
        return None
    problem = f"{tool}: 'size' must be {{\"rows\": R, \"cols\": C}} with whole numbers 1..{MAX_TERMINAL_DIMENSION}"
    if not isinstance(value, Mapping) or set(value) != {"rows", "cols"}:
        raise ShellError(f"{problem}, got {value!r}")
    dims = (value["rows"], value["cols"])
    if not all(isinstance(d, int) and not isinstance(d, bool) and 1 <= d <= MAX_TERMINAL_DIMENSION for d in dims):
        raise ShellError(f"{problem}, got {value!r}")
    return cast("tuple[int, int]", dims)


def _optional_str(args: Mapping[str, object], tool: str, name: str) -> str | None:
    value = args.get(name)
    if value is None or isinstance(value, str):
        return value
    raise ShellError(f"{tool}: {name!r} must be a string, got {value!r}")


def _int_arg(args: Mapping[str, object], tool: str, name: str, default: int | None) -> int | None:
    value = args.get(name)
    if value is None:
        return default
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    raise ShellError(f"{tool}: {name!r} must be an integer, got {value!r}")


def _yield_seconds(args: Mapping[str, object], tool: str, limits: tuple[int, int, int]) -> float:
    default, low, high = limits
    millis = _int_arg(args, tool, "yield_time_ms", default)
    assert millis is not None
    return min(max(millis, low), high) / 1000


def _max_bytes(args: Mapping[str, object], tool: str) -> int:
    tokens = _int_arg(args, tool, "max_output_tokens", DEFAULT_MAX_OUTPUT_TOKENS)
    assert tokens is not None
    if tokens < 0:
        raise ShellError(f"{tool}: 'max_output_tokens' must not be negative, got {tokens}")
    return min(tokens * BYTES_PER_TOKEN, MAX_OUTPUT_BYTES)
