"""Codex's ``-c key=value`` configuration overrides, read into a typed, frozen value.

Theory of operation. Codex's front ends pass settings as ``-c``/``--config key=value``
(the Python SDK before ``app-server``, the TypeScript SDK after ``exec``). Codex reads
each one this way (``codex-rs/common/src/config_override.rs``, and the CLI's help):
split on the first ``=``, trim both halves, refuse an empty key or a missing ``=``;
parse the value as TOML (as the right-hand side of ``_x_ = VALUE``) and, when that
fails, keep the raw text as a string -- so ``-c model=gpt-5.5`` and
``-c model="gpt-5.5"`` are the same. The key is a dotted path into the config tree;
each override replaces what is at its path, creating tables on the way, later ones
winning. ``parse_overrides`` does exactly that, then reads the keys trio-agent
implements out of the tree into ``CodexSettings`` and lists every other leaf in
``CodexSettings.ignored`` (the caller prints ``ignored_message()`` once on stderr). A
known key with a bad value raises ``CodexConfigError`` whose one-line message names
the key, what it must be and what it was (the commands exit 2 with it).

The keys (codex's names and values):

- ``model``; ``model_reasoning_effort`` (``none`` .. ``xhigh``: a ``Thinking``).
- ``sandbox_mode`` (a ``SandboxMode``); ``sandbox_workspace_write.network_access`` and
  ``.writable_roots`` (paths as given: the caller resolves relative ones);
  ``approval_policy`` (a ``ApprovalPolicy`` name; codex's granular table is refused).
- ``openai_base_url``; ``model_provider`` with ``model_providers.<id>.base_url``,
  ``.env_key`` (the variable holding that provider's API key) and ``.wire_api`` (only
  ``responses``). ``model_provider`` must be ``openai`` or an id defined there.
  ``CodexSettings.base_url`` and ``.api_key_env`` resolve the pair.
- ``web_search`` (``disabled``, ``cached``, ``live``; the legacy ``tools.web_search``
  boolean means ``live``/``disabled``). trio-agent has live search only (``web__run``),
  so ``web_search_enabled`` is True for ``live`` and False for ``disabled`` and
  ``cached``: a request for cached results never turns into live searches.
- ``instructions`` (replaces the base instructions) and ``developer_instructions``
  (added to them).
- Accepted, validated and carried, but with no effect on what trio-agent does:
  ``model_verbosity`` (``low``/``medium``/``high``: its requests always ask
  ``text.verbosity: "low"``) and ``show_raw_agent_reasoning`` (its items carry the
  reasoning summaries; the raw reasoning stays encrypted). They are not reported as
  ignored: codex's front ends send them, and refusing them would break those clients.

Pure: no I/O, no environment; ``tomllib`` only.
"""

from __future__ import annotations

import enum
import tomllib
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from types import MappingProxyType
from typing import Any
from urllib.parse import urlsplit

import attrs

from ._config import Thinking
from ._tools._security import ApprovalPolicy, SandboxMode

__all__ = ["CodexConfigError", "CodexSettings", "Provider", "WebSearch", "parse_overrides", "toml_value"]


class CodexConfigError(ValueError):
    """A ``-c key=value`` that is malformed or gives a known key a bad value (one line)."""


class WebSearch(enum.Enum):
    """Codex's ``web_search`` modes."""

    DISABLED = "disabled"
    CACHED = "cached"
    LIVE = "live"


@attrs.frozen
class Provider:
    """One ``model_providers.<id>`` table: the keys trio-agent reads of it."""

    id: str
    base_url: str | None = None
    env_key: str | None = None
    wire_api: str = "responses"


@attrs.frozen
class CodexSettings:
    """What a list of ``-c`` overrides sets; None (or empty) where it says nothing."""

    model: str | None = None
    reasoning_effort: Thinking | None = None
    sandbox_mode: SandboxMode | None = None
    approval_policy: ApprovalPolicy | None = None
    network_access: bool | None = None
    writable_roots: tuple[Path, ...] | None = None
    openai_base_url: str | None = None
    model_provider: str | None = None
    providers: Mapping[str, Provider] = attrs.field(factory=lambda: MappingProxyType({}))
    web_search: WebSearch | None = None
    instructions: str | None = None
    developer_instructions: str | None = None
    model_verbosity: str | None = None
    show_raw_agent_reasoning: bool | None = None
    #: The dotted keys given that trio-agent does not implement, sorted.
    ignored: tuple[str, ...] = ()

    @property
    def provider(self) -> Provider | None:
        """The ``model_providers`` entry ``model_provider`` names (None: the built-in ``openai``)."""
        return self.providers.get(self.model_provider) if self.model_provider else None

    @property
    def base_url(self) -> str | None:
        """The Responses API base URL: the chosen provider's, else ``openai_base_url``."""
        provider = self.provider
        if provider is not None and provider.base_url is not None:
            return provider.base_url
        return self.openai_base_url

    @property
    def api_key_env(self) -> str | None:
        """The environment variable the chosen provider's API key is in (None: the default)."""
        provider = self.provider
        return provider.env_key if provider is not None else None

    @property
    def web_search_enabled(self) -> bool | None:
        """Whether the live ``web__run`` tool is on (None: not said)."""
        return None if self.web_search is None else self.web_search is WebSearch.LIVE

    def ignored_message(self) -> str | None:
        """The one stderr line about ``ignored`` (None when nothing was ignored)."""
        if not self.ignored:
            return None
        return f"trio-agent: ignoring codex config keys it does not implement: {', '.join(self.ignored)}"


def toml_value(text: str) -> object:
    """``text`` as codex reads an override's value: TOML, else the raw string."""
    try:
        table = tomllib.loads(f"_x_ = {text}")
    except tomllib.TOMLDecodeError:
        return text
    return table.get("_x_", text)


def parse_overrides(raw: Sequence[str]) -> CodexSettings:
    """``CodexSettings`` of ``raw`` (each ``key=value``); ``CodexConfigError`` on a bad one."""
    tree: dict[str, Any] = {}
    for override in raw:
        key, sep, value = override.partition("=")
        key, value = key.strip(), value.strip()
        if not sep:
            raise CodexConfigError(f"-c {override!r}: expected key=value (for example -c model=\"gpt-5.5\")")
        if not key or any(not part for part in key.split(".")):
            raise CodexConfigError(f"-c {override!r}: the key before '=' must be a dotted name such as model "
                                   "or sandbox_workspace_write.network_access")
        _put(tree, key.split("."), toml_value(value))
    return _Reader(tree).settings()


def _put(tree: dict[str, Any], path: list[str], value: object) -> None:
    """Set ``path`` in ``tree`` to ``value`` as codex does: tables are created, or replace a
    non-table, on the way."""
    for part in path[:-1]:
        child = tree.get(part)
        if not isinstance(child, dict):
            child = tree[part] = {}
        tree = child
    tree[path[-1]] = value


def _leaves(tree: Mapping[str, Any], prefix: str = "") -> Iterator[str]:
    for key, value in tree.items():
        if isinstance(value, dict) and value:
            yield from _leaves(value, f"{prefix}{key}.")
        else:
            yield f"{prefix}{key}"


def _shown(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 80 else f"{text[:77]}..."


def _choices(enum_type: type[enum.Enum]) -> list[str]:
    return [str(member.value) for member in enum_type]


class _Reader:
    """Takes the known keys out of the override tree; what is left is ignored."""

    def __init__(self, tree: dict[str, Any]) -> None:
        self._tree = tree

    def _bad(self, key: str, expected: str, value: object) -> CodexConfigError:
        return CodexConfigError(f"-c {key}: must be {expected}, got {_shown(value)}")

    def _table(self, key: str, *, within: dict[str, Any] | None = None, name: str | None = None) -> dict[str, Any]:
        """The table at ``key`` (removed from the tree when it ends up empty)."""
        parent = self._tree if within is None else within
        value = parent.get(key, {})
        if not isinstance(value, dict):
            raise self._bad(name or key, "a table (set its keys as name.key=value)", value)
        return value

    def _take(self, key: str, within: dict[str, Any] | None = None) -> object:
        return (self._tree if within is None else within).pop(key, None)

    def string(self, key: str, *, within: dict[str, Any] | None = None, name: str | None = None) -> str | None:
        value = self._take(key, within)
        if value is None:
            return None
        if not isinstance(value, str) or not value:
            raise self._bad(name or key, "a non-empty string", value)
        return value

    def boolean(self, key: str, *, within: dict[str, Any] | None = None, name: str | None = None) -> bool | None:
        value = self._take(key, within)
        if value is None or isinstance(value, bool):
            return value
        raise self._bad(name or key, "true or false", value)

    def choice(self, key: str, allowed: list[str], *, hint: str = "") -> str | None:
        value = self._take(key)
        if value is None:
            return None
        if value not in allowed:
            raise self._bad(key, f"one of {', '.join(allowed)}{hint}", value)
        assert isinstance(value, str)
        return value

    def url(self, key: str, *, within: dict[str, Any] | None = None, name: str | None = None) -> str | None:
        value = self.string(key, within=within, name=name)
        if value is not None:
            parts = urlsplit(value)
            if parts.scheme not in ("http", "https") or not parts.hostname:
                raise self._bad(name or key, "an http:// or https:// URL such as https://api.openai.com/v1", value)
        return value

    def settings(self) -> CodexSettings:
        effort = self.choice("model_reasoning_effort", _choices(Thinking))
        sandbox = self.choice("sandbox_mode", _choices(SandboxMode))
        policy = self._approval_policy()
        network, roots = self._workspace_write()
        providers = self._providers()
        provider = self.string("model_provider")
        if provider is not None and provider != "openai" and provider not in providers:
            defined = ", ".join(sorted(providers)) or "none"
            raise CodexConfigError(f"-c model_provider: {provider!r} is neither 'openai' nor defined by "
                                   f"model_providers.{provider}.base_url=... (defined: {defined})")
        values: dict[str, Any] = {
            "model": self.string("model"), "instructions": self.string("instructions"),
            "developer_instructions": self.string("developer_instructions"),
            "model_verbosity": self.choice("model_verbosity", ["low", "medium", "high"]),
            "show_raw_agent_reasoning": self.boolean("show_raw_agent_reasoning"),
            "openai_base_url": self.url("openai_base_url"), "web_search": self._web_search(),
        }
        return CodexSettings(
            reasoning_effort=None if effort is None else Thinking(effort),
            sandbox_mode=None if sandbox is None else SandboxMode(sandbox),
            approval_policy=policy, network_access=network, writable_roots=roots,
            model_provider=provider, providers=MappingProxyType(providers),
            ignored=tuple(sorted(_leaves(self._tree))), **values,
        )

    def _approval_policy(self) -> ApprovalPolicy | None:
        value = self._take("approval_policy")
        if value is None:
            return None
        if isinstance(value, str) and value in _choices(ApprovalPolicy):
            return ApprovalPolicy(value)
        raise self._bad("approval_policy", f"one of {', '.join(_choices(ApprovalPolicy))} "
                                           "(granular policies are not implemented)", value)

    def _workspace_write(self) -> tuple[bool | None, tuple[Path, ...] | None]:
        table = self._table("sandbox_workspace_write")
        network = self.boolean("network_access", within=table, name="sandbox_workspace_write.network_access")
        roots = self._take("writable_roots", table)
        if roots is not None and not (isinstance(roots, list) and all(isinstance(r, str) and r for r in roots)):
            raise self._bad("sandbox_workspace_write.writable_roots", "an array of directory paths", roots)
        self._drop_if_empty("sandbox_workspace_write")
        return network, None if roots is None else tuple(Path(root) for root in roots)

    def _providers(self) -> dict[str, Provider]:
        table = self._table("model_providers")
        providers = {}
        for ident in list(table):
            name = f"model_providers.{ident}"
            entry = self._table(ident, within=table, name=name)
            wire_api = self.string("wire_api", within=entry, name=f"{name}.wire_api") or "responses"
            if wire_api != "responses":
                raise self._bad(f"{name}.wire_api", "'responses' (trio-agent speaks the Responses API only)", wire_api)
            providers[ident] = Provider(ident, base_url=self.url("base_url", within=entry, name=f"{name}.base_url"),
                                        env_key=self.string("env_key", within=entry, name=f"{name}.env_key"),
                                        wire_api=wire_api)
            if not entry:
                del table[ident]
        self._drop_if_empty("model_providers")
        return providers

    def _web_search(self) -> WebSearch | None:
        mode = self.choice("web_search", _choices(WebSearch))
        tools = self._table("tools")
        legacy = self.boolean("web_search", within=tools, name="tools.web_search")
        self._drop_if_empty("tools")
        if mode is not None:
            return WebSearch(mode)
        return None if legacy is None else WebSearch.LIVE if legacy else WebSearch.DISABLED

    def _drop_if_empty(self, key: str) -> None:
        if self._tree.get(key) == {}:
            del self._tree[key]
