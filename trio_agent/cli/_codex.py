"""Codex's command-line habits on ``trio-agent run`` (and ``serve``): its flags, and its
``-c key=value`` configuration overrides applied to run's options.

Theory of operation. A codex user's fingers type ``-m``, ``-s``, ``-C``, ``-c`` and
``--json``; where codex has a flag for something ``run`` does, ``run`` takes codex's
spelling as a real alias of its own option (the same ``dest``), so both spellings
behave identically, appear in ``--help`` together, and reach the warm daemon's
workers unchanged. Nothing is abbreviated (``_parser``). What maps to what
(codex: ``codex-rs/utils/cli/src/shared_options.rs``, ``codex-rs/exec/src/cli.rs``,
``codex-rs/tui/src/cli.rs``)::

    codex                                   trio-agent run             (serve)
    -m, --model MODEL                       -m, --model                -m, --model
    -s, --sandbox read-only                 -s read-only: commands read anything, write nothing
    -s, --sandbox workspace-write           -s workspace-write: write the workspace (and
                                            --writable-root/--add-dir), not .git, no network
    -s, --sandbox danger-full-access        -s danger-full-access: no sandbox at all
    -C, --cd DIR                            -C, --cd, --workspace      -C, --cd, --workspace
    -c, --config key=value                  -c (before or after run)   app-server -c (serve: no)
    --json (alias --experimental-json)      --json, --jsonl (one JSON event per line; ours,
                                            not codex exec's event shapes: `trio-agent exec`)
    -a, --ask-for-approval POLICY           -a, --ask-for-approval (untrusted, on-failure,
                                            on-request, never; codex's guardian: no)
    --add-dir DIR                           --add-dir, --writable-root
    PROMPT, `-` or piped stdin              the same (``_prompt``)
    -i/--image, -p/--profile, --oss,        not here; `trio-agent exec` takes codex exec's
    --search, --full-auto, --yolo,          whole command line (-i, -o, --output-schema,
    -o, --output-schema, --color            --full-auto, --yolo, resume)

The sandbox modes are codex's names and meanings; the default differs: codex
defaults to read-only in exec, trio-agent to workspace-write where Bubblewrap works
(else unconfined, with a warning), since ``run`` is meant to let the agent edit.

``-c key=value`` (:func:`codex_overrides`, :func:`apply_overrides`) is read by
``_codex_config.parse_overrides`` exactly as ``trio-agent exec`` and ``app-server``
read it (TOML value, else the raw string; later ones win; the top-level ``-c`` before
``run``'s). Flags win over ``-c`` (as codex's own flags win over its config), and
``-c`` over the environment. What each key does on ``run``:

- ``model`` -> ``--model``; ``model_reasoning_effort`` -> ``--thinking``;
- ``sandbox_mode`` -> ``--sandbox``; ``sandbox_workspace_write.network_access`` ->
  ``--network`` and ``.writable_roots`` -> ``--writable-root`` (relative to the
  workspace), both only when the mode is workspace-write (or not given), as codex
  applies them;
- ``approval_policy`` -> ``--ask-for-approval`` (granular policies are refused);
- ``web_search``: ``live`` keeps ``web__run``, ``disabled`` and ``cached`` leave it
  out (no cached index here: said on stderr);
- ``instructions`` replaces the default instructions (as ``--instructions TEXT``),
  ``developer_instructions`` is appended to them;
- ``openai_base_url``, or ``model_provider`` with ``model_providers.<id>.base_url``
  and ``.env_key`` -> the Responses base URL (as ``--api-base``, which wins) and the
  variable the key is read from (unset: exit 2);
- ``model_verbosity``, ``show_raw_agent_reasoning``: accepted, no effect; any other
  key: named once on stderr (``ignoring codex config keys ...``), no effect.

A bad override exits 2 with run's usage and one line naming the key.
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .._codex_config import CodexSettings

__all__ = ["add_config_option", "apply_overrides", "codex_overrides"]


def add_config_option(parser: argparse.ArgumentParser, dest: str) -> None:
    """Codex's ``-c/--config key=value`` on ``parser`` (a subcommand's own ``dest``: a
    subparser's default would overwrite the top-level ``-c`` values otherwise)."""
    parser.add_argument("-c", "--config", dest=dest, action="append", default=[], metavar="key=value",
                        help="a codex config override (TOML value, else the raw string; repeatable), e.g. "
                             "-c model_reasoning_effort=high; flags win over it")


def codex_overrides(parser: argparse.ArgumentParser, args: argparse.Namespace, dest: str) -> CodexSettings | None:
    """The top-level ``-c`` options and the subcommand's (``dest``), parsed; None when
    none was given; ``parser.error`` (exit 2) for a bad one."""
    raw = [*getattr(args, "codex_config", []), *getattr(args, dest, [])]
    if not raw:
        return None
    from .._codex_config import CodexConfigError, parse_overrides

    try:
        return parse_overrides(raw)
    except CodexConfigError as exc:
        parser.error(str(exc))


def provider_environ(parser: argparse.ArgumentParser, settings: CodexSettings,
                     environ: Mapping[str, str]) -> Mapping[str, str]:
    """``environ`` with the chosen provider's key (``env_key``) as ``OPENAI_API_KEY``,
    and the base URL it names recorded for the connection; exit 2 when unset."""
    variable = settings.api_key_env
    if variable is None:
        return environ
    key = environ.get(variable, "").strip()
    if not key:
        parser.error(f"-c model_providers.{settings.model_provider}.env_key={variable}: ${variable} is not set; "
                     "export the provider's API key there")
    return {**environ, "OPENAI_API_KEY": key}


def base_url_source(settings: CodexSettings) -> tuple[str, str] | None:
    """``(where, url)`` of the base URL the overrides set (None: none)."""
    url = settings.base_url
    if url is None:
        return None
    provider = settings.provider
    if provider is not None and provider.base_url is not None:
        return f"-c model_providers.{provider.id}.base_url", url
    return "-c openai_base_url", url


def apply_overrides(parser: argparse.ArgumentParser, args: argparse.Namespace, settings: CodexSettings,
                    environ: Mapping[str, str]) -> tuple[Mapping[str, str], tuple[str, ...]]:
    """Set ``run``'s options that no flag set from ``settings``; returns the environment
    the model connection is read from and the notes to print on stderr."""
    if args.model is None:
        args.model = settings.model
    if args.thinking is None and settings.reasoning_effort is not None:
        args.thinking = settings.reasoning_effort.value
    if args.sandbox is None and settings.sandbox_mode is not None:
        args.sandbox, args.sandbox_source = settings.sandbox_mode.value, "-c sandbox_mode"
    if args.sandbox in (None, "workspace-write"):  # codex applies sandbox_workspace_write to that mode only
        args.network = args.network or bool(settings.network_access)
        if settings.writable_roots:
            args.writable_root = [*(args.writable_root or []), *_roots(parser, args, settings.writable_roots)]
    if args.ask_for_approval is None and settings.approval_policy is not None:
        args.ask_for_approval = settings.approval_policy.value
        args.approval_source = f"-c approval_policy={settings.approval_policy.value}"
    notes = [note for note in (settings.ignored_message(),) if note is not None]
    if settings.web_search is not None and not args.no_web_search:
        args.no_web_search = not settings.web_search_enabled
        if settings.web_search.value == "cached":
            notes.append("trio-agent: -c web_search=cached: there is no cached search index here, so the "
                         "web__run tool is left out")
    if args.api_base is None:
        args.config_base_url = base_url_source(settings)
    return provider_environ(parser, settings, environ), tuple(notes)


def _roots(parser: argparse.ArgumentParser, args: argparse.Namespace, roots: tuple[Path, ...]) -> list[Path]:
    workspace = (args.workspace or Path.cwd()).expanduser()
    resolved = []
    for root in roots:
        path = (root.expanduser() if root.expanduser().is_absolute() else workspace / root).resolve()
        if not path.is_dir():
            parser.error(f"-c sandbox_workspace_write.writable_roots: {str(root)!r} is not an existing directory "
                         f"(relative paths are relative to the workspace, {workspace})")
        resolved.append(path)
    return resolved
