"""The public surface: __all__ pinned, handles final, import layering, config validation."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import attrs
import pytest

import trio_agent as ta

PACKAGE_ROOT = Path(ta.__file__).resolve().parent

EXPECTED_ALL = [
    "Agent",
    "AgentAsleepPayload",
    "AgentClosed",
    "AgentConfig",
    "AgentError",
    "AgentEvent",
    "AgentEvents",
    "AgentHandle",
    "AgentStatistics",
    "AgentWokePayload",
    "ApiError",
    "ApiEventPayload",
    "ApiWarningPayload",
    "ApprovalChange",
    "ApprovalDecision",
    "ApprovalKind",
    "ApprovalPolicy",
    "ApprovalRequest",
    "ApprovalRequestedPayload",
    "ApprovalResolvedPayload",
    "Approvals",
    "AssistantDeltaPayload",
    "AssistantMessagePayload",
    "AuthenticationError",
    "ChangedFile",
    "ChatGptAuth",
    "ChatGptAuthSnapshot",
    "CheckpointLineageMismatch",
    "CheckpointMissing",
    "ConfigError",
    "ConnectionFailed",
    "ConnectionLost",
    "Declined",
    "DurableSession",
    "EVENT_PAYLOADS",
    "EventKind",
    "EventPayload",
    "EventSubscription",
    "EventsOverflowed",
    "ForkBeforeCompletedTurn",
    "Handler",
    "History",
    "InvalidImageRequest",
    "InvalidPrompt",
    "InvalidSessionSnapshot",
    "JsonValue",
    "MailboxFull",
    "McpLogPayload",
    "McpProgressPayload",
    "McpServer",
    "McpServerFailedPayload",
    "McpServerReadyPayload",
    "McpServerRestartingPayload",
    "ModelAttemptFailedPayload",
    "ModelAttemptRetryingPayload",
    "ModelAttemptStartedPayload",
    "ModelCallCompletedPayload",
    "ModelCallFailedPayload",
    "ModelCallStartedPayload",
    "ModelCompactionCompletedPayload",
    "ModelCompactionFailedPayload",
    "ModelCompactionFallbackPayload",
    "ModelCompactionStartedPayload",
    "ModelConnectionCompletedPayload",
    "ModelConnectionFailedPayload",
    "ModelConnectionStartedPayload",
    "ModelWarmupCompletedPayload",
    "ModelWarmupFailedPayload",
    "ModelWarmupStartedPayload",
    "OutputSchema",
    "PlanStep",
    "PlanUpdatedPayload",
    "Profile",
    "Prompt",
    "ProtocolError",
    "ReasoningSummaryDeltaPayload",
    "ResponseTimeout",
    "Responses",
    "ResponsesError",
    "Rollout",
    "RolloutConfig",
    "RolloutError",
    "RolloutWarning",
    "RunCompletedPayload",
    "RunErrorPayload",
    "RunFailedPayload",
    "RunStartedPayload",
    "RunSteeredPayload",
    "Sandbox",
    "SandboxMode",
    "SandboxUnavailable",
    "SandboxUnavailablePayload",
    "SessionSnapshot",
    "Sleep",
    "SleepCompletedPayload",
    "SleepRefused",
    "SleepStartedPayload",
    "SteerQueueFull",
    "Submission",
    "Thinking",
    "ThreadError",
    "ThreadEvent",
    "ThreadEvents",
    "ThreadInfo",
    "ThreadManager",
    "ThreadStatus",
    "TokenCounts",
    "ToolBlockedPayload",
    "ToolCallPayload",
    "ToolContext",
    "ToolDecorator",
    "ToolProgressPayload",
    "ToolResultPayload",
    "ToolSpec",
    "Tools",
    "Tracing",
    "Transport",
    "Turn",
    "TurnCancelled",
    "TurnControl",
    "TurnFailed",
    "TurnNotCancellable",
    "TurnNotSteerable",
    "TurnResult",
    "TurnStatus",
    "UnsubscribeStatus",
    "UsageLimitExceeded",
    "Wakeup",
    "WorkspaceChanged",
    "open_agent",
    "open_thread_manager",
    "payload_of",
    "tool",
    "write_jsonl",
]


# Record/replay names of the public test kit (issue 15); other kit names are not pinned here.
REPLAY_TESTING_NAMES = [
    "Cassette", "CassetteError", "CassetteHeader", "Observation", "ReplayMatch", "ReplayMismatch", "ReplayResult",
    "ReplayServer", "ReplayedTurn", "replay", "replay_config",
]


def test_the_testing_kit_exports_record_and_replay() -> None:
    import trio_agent.testing as testing

    assert set(REPLAY_TESTING_NAMES) <= set(testing.__all__)
    for name in REPLAY_TESTING_NAMES:
        assert getattr(testing, name, None) is not None, name
    assert issubclass(testing.CassetteError, ta.AgentError) and issubclass(testing.ReplayMismatch, ta.AgentError)
    assert "record" in {field.name for field in attrs.fields(ta.AgentConfig)}


def test_all_is_pinned() -> None:
    assert ta.__all__ == EXPECTED_ALL
    assert sorted(ta.__all__) == ta.__all__
    assert len(set(ta.__all__)) == len(ta.__all__)


@pytest.mark.parametrize("name", EXPECTED_ALL)
def test_every_exported_name_exists(name: str) -> None:
    assert getattr(ta, name, None) is not None


@pytest.mark.parametrize("name", EXPECTED_ALL)
def test_exported_names_report_the_package_as_their_module(name: str) -> None:
    assert getattr(ta, name).__module__ == "trio_agent"


def test_no_public_name_outside_all() -> None:
    # dir() lists the names the package has not loaded yet (PEP 562); vars() only those it has
    listed = {name for name in dir(ta) if not name.startswith("_") and not isinstance(getattr(ta, name), type(sys))}
    assert listed == set(EXPECTED_ALL)
    bound = {name for name, value in vars(ta).items() if not name.startswith("_") and not isinstance(value, type(sys))}
    assert bound <= set(EXPECTED_ALL)


def test_public_attrs_classes_have_resolved_field_types_in_a_fresh_interpreter() -> None:
    code = (
        "import attrs, trio_agent as ta\n"
        "assert attrs.fields(ta.Sandbox).mode.type is ta.SandboxMode\n"
        "assert attrs.fields(ta.ApprovalRequest).kind.type is ta.ApprovalKind\n"
        "assert attrs.fields(ta.Approvals).policy.type is ta.ApprovalPolicy  # the hook's protocol resolves too\n"
        "assert attrs.fields(ta.RolloutConfig).home.type.__name__ == 'Path'\n"
        "attrs.resolve_types(ta.Sandbox)  # already done: no lookup in trio_agent's namespace\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, cwd=PACKAGE_ROOT.parent, timeout=60)


def test_a_snapshot_parses_before_the_public_name_is_read() -> None:
    # from_json resolves its own annotations: JsonValue is not bound in trio_agent yet
    code = (
        "import trio_agent\n"
        "from trio_agent._session.snapshot import SessionSnapshot\n"
        "data = {'version': 1, 'model': 'm', 'lineage_id': 'l', 'prompt_cache_key': 'k', 'workspace': '/',\n"
        "        'request_prefix': [], 'history': [{'type': 'message'}]}\n"
        "assert SessionSnapshot.from_json(data).history == [{'type': 'message'}]\n"
        "assert 'JsonValue' not in vars(trio_agent)\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, cwd=PACKAGE_ROOT.parent, timeout=60)


def _type_checking_imports() -> dict[str, str]:
    """public name -> module, from the ``if TYPE_CHECKING:`` imports of ``__init__``."""
    tree = ast.parse((PACKAGE_ROOT / "__init__.py").read_text(encoding="utf-8"))
    found: dict[str, str] = {}
    for node in tree.body:
        if isinstance(node, ast.If) and _is_type_checking(node):
            for child in node.body:
                assert isinstance(child, ast.ImportFrom) and child.level == 1
                for alias in child.names:
                    assert alias.asname == alias.name  # an explicit re-export
                    found[alias.name] = f".{child.module}"
    return found


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def test_the_lazy_table_matches_what_type_checkers_read() -> None:
    # mypy and pyright read the TYPE_CHECKING imports; the interpreter reads _SOURCES
    table = {name: source for source, names in ta._SOURCES.items() for name in names}
    assert table == _type_checking_imports()
    assert sorted(table) == EXPECTED_ALL


def test_every_name_loads_on_first_read_in_a_fresh_interpreter() -> None:
    # each name read for the first time (a from-import or an attribute), in one new
    # interpreter: the same object both ways, reporting the package as its module
    code = (
        "import importlib, trio_agent\n"
        "for i, name in enumerate(trio_agent.__all__):\n"
        "    value = getattr(importlib.import_module('trio_agent'), name) if i % 2 else None\n"
        "    exec(f'from trio_agent import {name} as imported', globals())\n"
        "    assert value is None or value is imported, name\n"
        "    assert imported is getattr(trio_agent, name) and imported.__module__ == 'trio_agent', name\n"
        "    assert name in vars(trio_agent), name\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, cwd=PACKAGE_ROOT.parent, timeout=60)


@pytest.mark.parametrize("name", ["Agent", "Turn", "TurnControl", "AgentHandle", "TurnResult"])
def test_handles_are_final(name: str) -> None:
    cls = getattr(ta, name)
    assert isinstance(cls, type)
    assert getattr(cls, "__final__", False) is True


def test_errors_form_one_tree() -> None:
    for name in EXPECTED_ALL:
        value = getattr(ta, name)
        if isinstance(value, type) and issubclass(value, BaseException) and not issubclass(value, Warning):
            assert issubclass(value, ta.AgentError), name
    assert issubclass(ta.ConfigError, ValueError)
    for cls in (ta.ApiError, ta.ConnectionFailed, ta.ConnectionLost, ta.ProtocolError, ta.ResponseTimeout):
        assert issubclass(cls, ta.ResponsesError)
    for cls in (ta.InvalidImageRequest, ta.UsageLimitExceeded, ta.CheckpointMissing):
        assert issubclass(cls, ta.ApiError)


# -- import layering (DESIGN.md: _wire and _session are pure) ------------------------

FORBIDDEN_TOP = {"trio", "trio_websocket", "httpx", "time", "random", "uuid"}
FORBIDDEN_PACKAGES = {"trio_agent._transport", "trio_agent._runtime"}


def _module_name(path: Path) -> str:
    relative = path.relative_to(PACKAGE_ROOT.parent).with_suffix("")
    parts = list(relative.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _package_of(path: Path) -> str:
    name = _module_name(path)
    return name if path.name == "__init__.py" else name.rpartition(".")[0]


def _resolve(package: str, module: str | None, level: int) -> str:
    if level == 0:
        return module or ""
    base = package.split(".")
    if level > 1:
        base = base[: -(level - 1)]
    return ".".join([*base, module] if module else base)


def _is_forbidden(name: str) -> bool:
    if name.split(".")[0] in FORBIDDEN_TOP:
        return True
    return any(name == pkg or name.startswith(pkg + ".") for pkg in FORBIDDEN_PACKAGES)


def forbidden_imports(source: str, package: str) -> list[str]:
    """Every forbidden module imported by ``source`` (a module inside ``package``)."""
    found: list[str] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found.extend(alias.name for alias in node.names if _is_forbidden(alias.name))
        elif isinstance(node, ast.ImportFrom):
            target = _resolve(package, node.module, node.level)
            if _is_forbidden(target):
                found.append(target)
                continue
            # ``from .. import _transport`` imports a subpackage by name
            found.extend(f"{target}.{alias.name}" for alias in node.names if _is_forbidden(f"{target}.{alias.name}"))
    return found


@pytest.mark.parametrize(
    ("source", "package", "expected"),
    [
        ("import trio", "trio_agent._wire", ["trio"]),
        ("import trio.lowlevel", "trio_agent._wire", ["trio.lowlevel"]),
        ("from trio_websocket import open_websocket_url", "trio_agent._wire", ["trio_websocket"]),
        ("import httpx as h", "trio_agent._session", ["httpx"]),
        ("from time import monotonic", "trio_agent._session", ["time"]),
        ("import random, json", "trio_agent._session", ["random"]),
        ("def f():\n    import uuid\n", "trio_agent._session", ["uuid"]),
        ("from .._transport import retry", "trio_agent._wire", ["trio_agent._transport"]),
        ("from .._runtime._agent import Agent", "trio_agent._wire", ["trio_agent._runtime._agent"]),
        ("from .. import _transport", "trio_agent._session", ["trio_agent._transport"]),
        ("from .. import _errors, _runtime", "trio_agent._session", ["trio_agent._runtime"]),
        ("from trio_agent._transport.retry import x", "trio_agent._wire", ["trio_agent._transport.retry"]),
        ("import trio_agent._runtime", "trio_agent._wire", ["trio_agent._runtime"]),
        ("from .history import History", "trio_agent._session", []),
        ("from .._errors import ProtocolError", "trio_agent._wire", []),
        ("import json, enum\nfrom typing import Any", "trio_agent._wire", []),
        ("import trio_agent._transportation", "trio_agent._wire", []),
        ("import timeit", "trio_agent._wire", []),
    ],
)
def test_forbidden_import_detector(source: str, package: str, expected: list[str]) -> None:
    assert forbidden_imports(source, package) == expected


PURE_FILES = sorted([*(PACKAGE_ROOT / "_wire").rglob("*.py"), *(PACKAGE_ROOT / "_session").rglob("*.py")])


def test_pure_layers_have_files() -> None:
    names = {path.name for path in PURE_FILES}
    assert {"frames.py", "stream.py", "request.py", "history.py", "conversation.py"} <= names


@pytest.mark.parametrize("path", PURE_FILES, ids=lambda p: str(p.relative_to(PACKAGE_ROOT)))
def test_wire_and_session_import_nothing_impure(path: Path) -> None:
    found = forbidden_imports(path.read_text(encoding="utf-8"), _package_of(path))
    assert found == [], f"{path.relative_to(PACKAGE_ROOT)} imports {found}; pass ids/now in instead"


def test_import_is_lazy_about_heavy_dependencies() -> None:
    # ray: only trio_agent.ray (the [ray] extra) imports it
    heavy = ("httpx", "quickjs", "mcp", "httpx2", "pydantic", "ray")
    code = f"import sys, trio_agent\nprint(','.join(sorted(m for m in {heavy!r} if m in sys.modules)))\n"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60)
    assert result.stdout.strip() == "", f"`import trio_agent` imported: {result.stdout.strip()}"


# -- AgentConfig validation (SPEC sec. 6) ---------------------------------------------


class FakeAuthSource:
    def validate(self) -> None:
        return None

    async def snapshot(self) -> ta.ChatGptAuthSnapshot:
        return ta.ChatGptAuthSnapshot(token="tok", account_id="acct")

    async def recover_unauthorized(self, rejected: ta.ChatGptAuthSnapshot) -> None:
        return None


def chatgpt_auth() -> ta.ChatGptAuth:
    return ta.ChatGptAuth(FakeAuthSource())


def test_rejects_invalid_auth_storage_and_https_history_policies(tmp_path: Path) -> None:
    """Port of nanocodex ``rejects_invalid_auth_storage_and_https_history_policies``."""
    with pytest.raises(ta.ConfigError) as info:
        ta.AgentConfig(auth=chatgpt_auth(), workspace=tmp_path, responses=ta.Responses(profile=ta.Profile.OPENAI,
                                                                                       store=True))
    assert "ChatGPT subscription authentication does not support store: true" in str(info.value)

    with pytest.raises(ta.ConfigError) as info:
        ta.AgentConfig(
            auth="test-key",
            workspace=tmp_path,
            responses=ta.Responses(profile=ta.Profile.OPENAI,
                                   transport=ta.Transport.HTTPS, store=False, history=ta.History.INCREMENTAL),
        )
    assert "HTTPS with store: false requires full client-history replay" in str(info.value)
    assert "History.FULL_REPLAY" in str(info.value)


HTTPS, WEBSOCKET = ta.Transport.HTTPS, ta.Transport.WEBSOCKET
FULL, INCREMENTAL = ta.History.FULL_REPLAY, ta.History.INCREMENTAL


# (transport, store, history given, effective policy) with an API key: explicit policies
# are kept; an omitted one is derived -- FULL_REPLAY exactly for HTTPS with store: false
# (SPEC sec. 6, as nanocodex does).
@pytest.mark.parametrize(
    ("transport", "store", "given", "effective"),
    [
        (HTTPS, False, None, FULL),
        (HTTPS, False, FULL, FULL),
        (HTTPS, True, None, INCREMENTAL),
        (HTTPS, True, INCREMENTAL, INCREMENTAL),
        (HTTPS, True, FULL, FULL),
        (HTTPS, None, None, INCREMENTAL),  # an API key stores by default
        (WEBSOCKET, False, None, INCREMENTAL),  # chains on its connection (SPEC sec. 2)
        (WEBSOCKET, False, INCREMENTAL, INCREMENTAL),
        (WEBSOCKET, True, None, INCREMENTAL),
        (WEBSOCKET, None, FULL, FULL),
    ],
)
def test_the_history_policy_is_kept_or_derived(
    tmp_path: Path, transport: ta.Transport, store: bool | None, given: ta.History | None, effective: ta.History
) -> None:
    responses = ta.Responses(profile=ta.Profile.OPENAI, transport=transport, store=store, history=given)
    # A Responses knows its policy unless it is left to the auth's default store.
    assert responses.history is (effective if store is not None or given is not None else None)
    config = ta.AgentConfig(auth="test-key", workspace=tmp_path, responses=responses)
    assert config.responses.history is effective
    assert config.history is effective
    assert config.responses == responses  # the same settings, only told the auth


def test_chatgpt_auth_derives_full_replay_over_https(tmp_path: Path) -> None:
    shared = ta.Responses(profile=ta.Profile.OPENAI, transport=ta.Transport.HTTPS)
    assert shared.history is None  # store: left to the auth
    chatgpt = ta.AgentConfig(auth=chatgpt_auth(), workspace=tmp_path, responses=shared)
    assert chatgpt.store is False
    assert chatgpt.responses.history is ta.History.FULL_REPLAY and chatgpt.history is ta.History.FULL_REPLAY
    # The caller's Responses is not changed: another config with an API key stores and chains.
    api_key = ta.AgentConfig(auth="test-key", workspace=tmp_path, responses=shared)
    assert shared.history is None
    assert api_key.store is True and api_key.history is ta.History.INCREMENTAL
    # A config evolved to another auth derives again.
    assert attrs.evolve(api_key, auth=chatgpt_auth()).history is ta.History.FULL_REPLAY
    assert attrs.evolve(chatgpt, auth="test-key").history is ta.History.INCREMENTAL
    # Over WebSocket, ChatGPT's store: false still chains on the connection.
    ws = ta.AgentConfig(auth=chatgpt_auth(), workspace=tmp_path, responses=ta.Responses(profile=ta.Profile.OPENAI))
    assert ws.history is ta.History.INCREMENTAL


def test_an_explicit_incremental_policy_that_ephemeral_https_cannot_honour_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ta.ConfigError, match="HTTPS with store: false requires full client-history replay"):
        ta.Responses(profile=ta.Profile.OPENAI,
                     transport=ta.Transport.HTTPS, store=False, history=ta.History.INCREMENTAL)
    # With ChatGPT auth store: false is the auth's default: refused once the auth is known.
    incremental = ta.Responses(profile=ta.Profile.OPENAI, transport=ta.Transport.HTTPS, history=ta.History.INCREMENTAL)
    with pytest.raises(ta.ConfigError, match="HTTPS with store: false requires full client-history replay"):
        ta.AgentConfig(auth=chatgpt_auth(), workspace=tmp_path, responses=incremental)
    assert ta.AgentConfig(auth="test-key", workspace=tmp_path, responses=incremental).history is ta.History.INCREMENTAL


@pytest.mark.parametrize(("field", "value"), [("history", "full_history"), ("history", True), ("store", "no"),
                                              ("store", 0)])
def test_history_and_store_must_be_their_types(field: str, value: object) -> None:
    with pytest.raises(ta.ConfigError, match=f"{field} must be"):
        ta.Responses(profile=ta.Profile.OPENAI, **{field: value})  # type: ignore[arg-type]


def test_responses_repr_shows_the_policy_as_given() -> None:
    text = repr(ta.Responses(profile=ta.Profile.OPENAI, transport=ta.Transport.HTTPS, store=False))
    assert "store=False, profile=<Profile.OPENAI: 'openai'>, history=None" in text and "_auth_store" not in text


@pytest.mark.parametrize("store", [None, False])
def test_chatgpt_auth_without_store_true_is_accepted(tmp_path: Path, store: bool | None) -> None:
    config = ta.AgentConfig(auth=chatgpt_auth(), workspace=tmp_path, responses=ta.Responses(profile=ta.Profile.OPENAI,
                                                                                            store=store))
    assert config.store is False
    assert config.is_chatgpt


def test_api_key_defaults_to_store_true(tmp_path: Path) -> None:
    assert ta.AgentConfig(auth="test-key", workspace=tmp_path).store is True


@pytest.mark.parametrize("auth", ["", "   ", None, 42])
def test_empty_auth_is_rejected_with_advice(tmp_path: Path, auth: object) -> None:
    with pytest.raises(ta.ConfigError) as info:
        ta.AgentConfig(auth=auth, workspace=tmp_path)  # type: ignore[arg-type]
    message = str(info.value)
    assert "auth must be a non-empty API key" in message
    assert "OPENAI_API_KEY" in message


def test_bad_workspace_is_rejected_with_advice(tmp_path: Path) -> None:
    missing = tmp_path / "does-not-exist"
    with pytest.raises(ta.ConfigError) as info:
        ta.AgentConfig(auth="test-key", workspace=missing)
    assert str(missing) in str(info.value)
    assert "is not a directory" in str(info.value)
    assert "pass an existing directory" in str(info.value)
    a_file = tmp_path / "file.txt"
    a_file.write_text("x")
    with pytest.raises(ta.ConfigError, match="is not a directory"):
        ta.AgentConfig(auth="test-key", workspace=a_file)


@pytest.mark.parametrize("max_attempts", [0, -1])
def test_max_attempts_must_be_positive(max_attempts: int) -> None:
    with pytest.raises(ta.ConfigError) as info:
        ta.Responses(profile=ta.Profile.OPENAI, max_attempts=max_attempts)
    assert "max_attempts must be a positive integer or None" in str(info.value)
    assert repr(max_attempts) in str(info.value)


def test_max_attempts_one_is_kept(tmp_path: Path) -> None:
    config = ta.AgentConfig(auth="test-key", workspace=tmp_path, responses=ta.Responses(profile=ta.Profile.OPENAI,
                                                                                        max_attempts=1))
    assert config.max_attempts == 1
    assert ta.AgentConfig(auth="test-key", workspace=tmp_path).max_attempts == 5


def test_config_errors_are_value_errors(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="ChatGPT subscription"):
        ta.AgentConfig(auth=chatgpt_auth(), workspace=tmp_path, responses=ta.Responses(profile=ta.Profile.OPENAI,
                                                                                       store=True))
