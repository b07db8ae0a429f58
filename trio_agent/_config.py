"""Agent configuration: ``AgentConfig``, the model settings (``Thinking``,
``DEFAULT_MODEL``, context windows), and the public face of the endpoint settings
(``Responses`` and its enums, ``_base/responses.py``, re-exported here).

Every class here is a frozen attrs value validated on construction, so a bad
combination fails where it is written (SPEC sec. 6), never halfway through a turn.

The configuration layer (docs/architecture.md, "Layers"): this module imports only
the foundation, the pure session model (``_session.snapshot``, for a resumed session)
and its own values in ``_base/`` (the sandbox and approval policies, the auth values,
which it re-exports). Its fields name the higher parts they take -- the tools, the
agent handle a tools factory is given, the rollout and tracing settings -- through
protocols of this layer (``_base/parts.py``, ``_base/handle.py``); what it needs of
them at run time -- the ``RolloutConfig`` and ``Tracing`` classes, the default tools --
it reaches through ``_base/links.py``, which the package face fills in.
"""

from __future__ import annotations

import enum
import operator
import os
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import attrs

from ._base.approvals import Approvals
from ._base.auth import ChatGptAuth, ChatGptAuthSnapshot, ChatGptAuthSource
from ._base.auth import redact as _redact
from ._base.links import linked
from ._base.policies import ApprovalPolicy, Sandbox, SandboxMode
from ._base.responses import History, Profile, Responses, Transport, api_base_url, websocket_url
from ._errors import ConfigError, WorkspaceChanged
from ._ids import session_id_problem

if TYPE_CHECKING:
    from ._base.handle import AgentHandle
    from ._base.parts import RolloutSettings, ToolSet, TracingSettings
    from ._session.snapshot import SessionSnapshot

__all__ = [
    "DEFAULT_MODEL",
    "AgentConfig",
    "ChatGptAuth",
    "ChatGptAuthSnapshot",
    "ChatGptAuthSource",
    "History",
    "Profile",
    "Responses",
    "Thinking",
    "Transport",
    "context_window",
]

DEFAULT_MODEL = "gpt-5.5"

# Context windows by model slug; unknown models get the default. Used for
# auto-compaction (90% of the window, SPEC sec. 8).
_CONTEXT_WINDOWS = {
    "gpt-5.5": 272_000,
    "gpt-5.6-sol": 272_000,
    "gpt-5.4": 272_000,
    "gpt-5": 272_000,
}


def context_window(model: str) -> int:
    """The context window, in tokens, of ``model`` (272,000 when unknown)."""
    return _CONTEXT_WINDOWS.get(model, 272_000)


class Thinking(enum.Enum):
    """Reasoning effort; the value is what ``reasoning.effort`` carries on the wire.
    ``NONE`` asks for no reasoning: OpenAI's servers get ``effort: "none"``, other
    servers (``Profile.GENERIC``) no ``reasoning`` or ``include`` field at all."""

    NONE = "none"
    MINIMAL = "minimal"
    LOW = "low"
    MEDIUM = "medium"
    HIGH = "high"
    XHIGH = "xhigh"



def _sandbox(value: Sandbox | SandboxMode | str | None) -> Sandbox | None:
    """``AgentConfig.sandbox``: a ``Sandbox``, or a bare mode (its defaults: network off)."""
    if value is None or isinstance(value, Sandbox):
        return value
    return Sandbox(mode=value)


def _approval(value: Approvals | ApprovalPolicy | str) -> Approvals:
    """``AgentConfig.approval``: an ``Approvals``, or a bare policy (valid only for NEVER)."""
    if isinstance(value, Approvals):
        return value
    return Approvals(policy=value)


def _given_thinking(value: Thinking | None) -> Thinking:
    """``AgentConfig.thinking`` as given; None (the profile's default) is resolved by
    ``__attrs_post_init__`` before anyone can read it."""
    return cast(Thinking, value)


def _default_session_id() -> str:
    from ._ids import uuid7_text

    return uuid7_text()


@attrs.frozen
class AgentConfig:
    """Everything an agent needs; validated on construction (raises ``ConfigError``).

    ``sandbox``: how ``exec_command`` confines commands (a ``ta.Sandbox`` or a bare
    ``ta.SandboxMode``). ``None``, the default, is ``workspace-write`` with the network
    off when a sandbox works here, and otherwise ``danger-full-access``, announced by a
    ``sandbox.unavailable`` event and a ``RuntimeWarning``; a mode given explicitly
    that cannot work makes ``open_agent`` raise ``ta.SandboxUnavailable``.
    ``approval``: when calls wait for a decision and who decides (a ``ta.Approvals``;
    a bare ``ta.ApprovalPolicy.NEVER``, the default, asks nobody).
    ``api_events``: emit an ``api.event`` for every request sent and every server frame
    received (the nanocodex event protocol; on by default). ``False`` leaves them out of
    ``agent.events`` -- about half the events of a streamed answer, each one a wake-up
    of the consumer -- and changes nothing else: every other event, its payload and its
    order stay the same (``seq`` then counts only the events emitted). For applications
    that never read raw frames; tracing still sees them when ``tracing`` is set.
    """

    auth: str | ChatGptAuth = attrs.field(repr=_redact)
    model: str = DEFAULT_MODEL
    instructions: str | None = None
    # None: the profile's default -- MEDIUM for OpenAI's servers, NONE (no reasoning field)
    # for others; read back resolved.
    thinking: Thinking = attrs.field(default=None, converter=_given_thinking)
    fast_mode: bool = False
    workspace: Path | None = attrs.field(default=None, converter=attrs.converters.optional(Path))
    responses: Responses = attrs.field(factory=Responses)
    session_id: str = attrs.field(factory=_default_session_id)
    prompt_cache_key: str | None = None
    shared_prompt_cache: bool = False
    # The higher parts are named through protocols of this layer (``_base/parts.py``):
    # a ta.Tools (or a factory making one per agent), a ta.RolloutConfig, a ta.Tracing.
    tools: ToolSet | None = None
    tools_factory: Callable[[AgentHandle], ToolSet] | None = None
    rollout: RolloutSettings | None = None
    resume: SessionSnapshot | None = None
    tracing: TracingSettings | None = None  # OpenTelemetry spans and metrics (ta.Tracing, the [otel] extra)
    # A cassette file to record this agent's traffic into (record/replay, docs/cassettes.md):
    # created (truncated) when the agent opens, complete once its block has ended.
    record: Path | None = attrs.field(default=None, converter=attrs.converters.optional(Path))
    sandbox: Sandbox | None = attrs.field(default=None, converter=_sandbox)
    approval: Approvals = attrs.field(factory=Approvals, converter=_approval)
    api_events: bool = True

    def __attrs_post_init__(self) -> None:
        self._check_auth()
        if not isinstance(self.api_events, bool):
            raise ConfigError(f"api_events must be True or False, got {self.api_events!r}")
        if not isinstance(self.responses, Responses):
            raise ConfigError(f"responses must be a ta.Responses, got {self.responses!r}")
        if self.thinking is None:
            default = Thinking.NONE if self.responses.profile is Profile.GENERIC else Thinking.MEDIUM
            object.__setattr__(self, "thinking", default)
        if not isinstance(self.thinking, Thinking):
            raise ConfigError(f"thinking must be a ta.Thinking, got {self.thinking!r}")
        # Our own copy, told the auth's default store, so that ``responses.history`` is
        # the effective policy (the caller's ``Responses`` may serve other configs).
        object.__setattr__(self, "responses", attrs.evolve(self.responses, _auth_store=not self.is_chatgpt))
        self.responses.check_history(self.store)
        if not self.model or not isinstance(self.model, str):
            raise ConfigError("model must be a non-empty string such as 'gpt-5.5'")
        problem = session_id_problem(self.session_id)
        if problem is not None:
            raise ConfigError(
                f"session_id {self.session_id!r:.80} is not usable: {problem}; it names the rollout file and "
                "travels in request headers. Omit it for a fresh UUIDv7"
            )
        if self.prompt_cache_key is not None and not self.prompt_cache_key.strip():
            raise ConfigError("prompt_cache_key must be non-empty; omit it to use the session id")
        if self.instructions is not None and not self.instructions.strip():
            raise ConfigError("instructions must be non-empty; omit them for the default")
        workspace = self.resolved_workspace()
        if not workspace.is_dir():
            raise ConfigError(
                f"workspace {str(workspace)!r} is not a directory; "
                "pass an existing directory (default: the current directory)"
            )
        if self.tools is not None and self.tools_factory is not None:
            raise ConfigError("pass either tools= or tools_factory=, not both")
        self._check_record()
        self._check_resume()
        self._check_tracing()

    def _check_tracing(self) -> None:
        if self.tracing is None:
            return  # without importing Tracing's module (an agent without tracing never needs it)
        if not isinstance(self.tracing, linked().tracing_type()):  # imports no OpenTelemetry
            raise ConfigError(f"tracing must be a ta.Tracing, got {type(self.tracing).__name__}")

    def _check_record(self) -> None:
        if self.record is None:
            return
        if self.record.is_dir():
            raise ConfigError(
                f"record={str(self.record)!r} is a directory; pass the path of the cassette file to write, "
                "such as session.cassette.jsonl"
            )
        parent = self.record.parent
        if not parent.is_dir():
            raise ConfigError(
                f"record={str(self.record)!r}: the directory {str(parent)!r} does not exist; create it first "
                "or record elsewhere"
            )

    def _check_resume(self) -> None:
        # Reached only when set, through the links (``_base/links.py``, which import the
        # module on first use): a config without a rollout must not load the rollout
        # module (``import trio_agent`` leaves it to the first ``RolloutConfig``).
        if self.rollout is not None and not isinstance(self.rollout, linked().rollout_type()):
            raise ConfigError(f"rollout must be a ta.RolloutConfig, got {type(self.rollout).__name__}")
        if self.resume is None:
            return
        from ._session.snapshot import SessionSnapshot, check_snapshot

        if not isinstance(self.resume, SessionSnapshot):
            raise ConfigError(
                "resume must be a ta.SessionSnapshot (see SessionSnapshot.from_json), "
                f"got {type(self.resume).__name__}"
            )
        check_snapshot(self.resume, explicit_cache_key=self.prompt_cache_key)
        self._check_resumed_prefix(self.resume)
        stored = Path(os.path.realpath(self.resume.workspace)) if self.resume.workspace else None
        if self.workspace is not None and stored is not None and Path(os.path.realpath(self.workspace)) != stored:
            raise WorkspaceChanged(
                f"the session was recorded in {str(stored)!r} but workspace={str(self.workspace)!r}; "
                "resume it in its own workspace (omit workspace=) or start a new session"
            )

    def _check_resumed_prefix(self, snapshot: SessionSnapshot) -> None:
        """The instructions and tool definitions must be the session's (SPEC sec. 8).

        The prefix is built by the same pure function the agent uses. Tools from a
        ``tools_factory`` exist only once the agent runs it (it needs the agent's
        handle), so with a factory only the instructions are checked here and the tool
        definitions when the agent opens."""
        from ._session.snapshot import check_prefix, request_prefix

        known = self.tools_factory is None
        definitions: list[dict[str, Any]] = []
        if known:
            definitions = self.tools.definitions() if self.tools is not None else linked().default_tool_definitions()
        prefix = request_prefix(definitions, self.instructions)
        check_prefix(snapshot, request_prefix=prefix, instructions=self.instructions, tools_known=known)

    def _check_auth(self) -> None:
        if isinstance(self.auth, ChatGptAuth):
            try:
                self.auth.source.validate()
            except Exception as exc:
                raise ConfigError(
                    f"the ChatGPT auth source is not usable: {exc}; log in again or pass an API key"
                ) from exc
            if self.responses.store is True:
                raise ConfigError(
                    "ChatGPT subscription authentication does not support store: true; "
                    "pass store=False (or leave it unset)"
                )
            return
        if not isinstance(self.auth, str) or not self.auth.strip():
            raise ConfigError(
                "auth must be a non-empty API key string or a ta.ChatGptAuth; "
                "set OPENAI_API_KEY or pass auth='sk-...'"
            )
        bad = next((i for i, char in enumerate(self.auth) if not "!" <= char <= "~"), None)
        if bad is not None:
            # Never echo the key: say where the problem is, not what it is.
            raise ConfigError(
                f"the API key has a whitespace, control or non-ASCII character at position {bad + 1} "
                f"of {len(self.auth)}; API keys are printable ASCII with no spaces. Check for a stray "
                "newline or quote where OPENAI_API_KEY is set"
            )

    def _derive(self, **changes: Any) -> AgentConfig:
        """A copy with ``changes`` that are valid by construction -- a fresh session id,
        this config's own cache key, thinking and resolved workspace, ``resume=None`` --
        without validating everything again (``attrs.evolve`` would: realpath,
        ``is_dir()``, the URL checks, the auth). For the agent's forks and children only;
        anything a caller passes goes through ``attrs.evolve``."""
        values = list(_field_values(self))
        try:
            for name, value in changes.items():
                values[_FIELD_INDEX[name]] = value
        except KeyError:
            unknown = changes.keys() - _FIELD_INDEX.keys()
            raise TypeError(f"not AgentConfig fields: {sorted(unknown)}") from None
        derived: AgentConfig = object.__new__(AgentConfig)
        # The slots' own setters (the class is frozen): one call per field, no name lookups.
        for put, value in zip(_FIELD_SETTERS, values, strict=True):
            put(derived, value)
        return derived

    @property
    def is_chatgpt(self) -> bool:
        return isinstance(self.auth, ChatGptAuth)

    @property
    def history(self) -> History:
        """The effective history policy (``responses.history``; never ``None`` here)."""
        history = self.responses.history
        assert history is not None  # the auth's default store is known
        return history

    @property
    def store(self) -> bool:
        """The effective ``store`` flag (unless set: True for API keys on OpenAI's servers,
        False for ChatGPT auth and for ``Profile.GENERIC``)."""
        store = self.responses.default_store
        return store if store is not None else not self.is_chatgpt

    @property
    def profile(self) -> Profile:
        """The effective dialect (``responses.profile``)."""
        return self.responses.profile

    @property
    def cache_key(self) -> str:
        if self.prompt_cache_key:
            return self.prompt_cache_key
        if self.resume is not None:
            return self.resume.prompt_cache_key  # a resumed session keeps its lineage
        return self.session_id

    @property
    def api_base_url(self) -> str:
        """The HTTPS base URL: explicit, else the auth's default."""
        return api_base_url(self.responses, chatgpt=self.is_chatgpt)

    @property
    def websocket_url(self) -> str:
        """The WebSocket endpoint: explicit, or derived from ``api_base_url``."""
        return websocket_url(self.responses, chatgpt=self.is_chatgpt)

    @property
    def max_attempts(self) -> int:
        return self.responses.max_attempts or 5

    def resolved_workspace(self) -> Path:
        """The workspace: explicit, else the resumed session's, else the current directory."""
        if self.workspace is not None:
            return Path(os.path.realpath(self.workspace))
        if self.resume is not None and self.resume.workspace:
            return Path(os.path.realpath(self.resume.workspace))
        return Path.cwd()


_CONFIG_FIELDS = tuple(field.name for field in attrs.fields(AgentConfig))
# For ``_derive`` (every fork builds its child's config): all the field values in one
# call, and each slot's descriptor setter, in field order.
_field_values = operator.attrgetter(*_CONFIG_FIELDS)
_FIELD_INDEX = {name: index for index, name in enumerate(_CONFIG_FIELDS)}
_FIELD_SETTERS: tuple[Callable[[AgentConfig, Any], None], ...] = tuple(
    vars(AgentConfig)[name].__set__ for name in _CONFIG_FIELDS
)
