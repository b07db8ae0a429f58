"""When a call needs approval (pure, table-driven) and the values the hook sees."""

from __future__ import annotations

from pathlib import Path

import pytest

import trio_agent as ta
from trio_agent._tools._policy import denial_hint, is_known_safe, plan_command, plan_patch

NEVER, ON_REQUEST, ON_FAILURE, UNTRUSTED = (
    ta.ApprovalPolicy.NEVER, ta.ApprovalPolicy.ON_REQUEST, ta.ApprovalPolicy.ON_FAILURE, ta.ApprovalPolicy.UNTRUSTED,
)
WRITE = ta.Sandbox()
READ = ta.Sandbox(ta.SandboxMode.READ_ONLY)
FULL = ta.Sandbox(ta.SandboxMode.DANGER_FULL_ACCESS)


# (policy, sandbox, command, escalate) -> (action, outside_sandbox, retry_on_denial)
@pytest.mark.parametrize(
    ("policy", "sandbox", "cmd", "escalate", "expected"),
    [
        (NEVER, WRITE, "make", False, ("run", False, False)),
        (NEVER, WRITE, "make", True, ("refuse", False, False)),
        (NEVER, FULL, "make", True, ("run", False, False)),  # nothing to escalate to
        (ON_REQUEST, WRITE, "make", False, ("run", False, False)),
        (ON_REQUEST, WRITE, "make", True, ("ask", True, False)),
        (ON_REQUEST, READ, "make", True, ("ask", True, False)),
        (ON_FAILURE, WRITE, "make", False, ("run", False, True)),
        (ON_FAILURE, FULL, "make", False, ("run", False, False)),
        (ON_FAILURE, WRITE, "make", True, ("ask", True, False)),
        (UNTRUSTED, WRITE, "ls -la && git status", False, ("run", False, True)),
        (UNTRUSTED, WRITE, "make", False, ("ask", False, True)),
        (UNTRUSTED, FULL, "rm -rf build", False, ("ask", False, False)),
        (UNTRUSTED, WRITE, "make", True, ("ask", True, False)),
    ],
)
def test_command_plans(
    policy: ta.ApprovalPolicy, sandbox: ta.Sandbox, cmd: str, escalate: bool, expected: tuple[str, bool, bool]
) -> None:
    plan = plan_command(policy, sandbox, cmd, escalate=escalate, justification=None)
    assert (plan.action, plan.outside_sandbox, plan.retry_on_denial) == expected
    if plan.action != "run":
        assert plan.reason


def test_the_justification_is_the_reason_of_an_escalation() -> None:
    plan = plan_command(ON_REQUEST, WRITE, "pip install x", escalate=True, justification="Install the deps?")
    assert plan.reason == "Install the deps?"
    refused = plan_command(NEVER, WRITE, "pip install x", escalate=True, justification="Install?")
    assert "approval policy is 'never'" in refused.reason


def changes(*paths: str) -> tuple[ta.ChangedFile, ...]:
    return tuple(ta.ChangedFile(path, "update") for path in paths)


@pytest.mark.parametrize(
    ("policy", "sandbox", "paths", "action"),
    [
        (NEVER, WRITE, ("src/a.py",), "run"),
        (NEVER, FULL, ("src/a.py", ".git/config"), "run"),
        (NEVER, WRITE, (".git/config",), "refuse"),
        (NEVER, READ, ("src/a.py",), "refuse"),
        (ON_REQUEST, READ, ("src/a.py",), "ask"),
        (ON_REQUEST, WRITE, ("./.git/hooks/pre-commit",), "ask"),
        (ON_REQUEST, ta.Sandbox(writable_git=True), (".git/config",), "run"),
        (ON_FAILURE, WRITE, ("src/a.py",), "run"),
        (ON_FAILURE, READ, ("src/a.py",), "ask"),
        (UNTRUSTED, WRITE, ("src/a.py",), "ask"),
        (UNTRUSTED, FULL, ("src/a.py",), "ask"),
    ],
)
def test_patch_plans(policy: ta.ApprovalPolicy, sandbox: ta.Sandbox, paths: tuple[str, ...], action: str) -> None:
    assert plan_patch(policy, sandbox, changes(*paths)).action == action


def test_a_rename_into_git_is_a_git_write() -> None:
    moved = (ta.ChangedFile("notes.txt", "update", move_to=".git/info/exclude"),)
    plan = plan_patch(ON_REQUEST, WRITE, moved)
    assert plan.action == "ask" and ".git/info/exclude" in plan.reason


@pytest.mark.parametrize(
    "cmd",
    ["ls", "ls -la src", "cat a.txt | grep x | wc -l", "git status", "git log --oneline -5 && git diff HEAD~1",
     "pwd; echo hi", "find . -name '*.py'", "rg -n foo src", "sed -n 1,20p file.py", "head -n 5 a || true"],
)
def test_known_read_only_commands(cmd: str) -> None:
    assert is_known_safe(cmd)


@pytest.mark.parametrize(
    "cmd",
    ["rm -rf build", "echo x > file", "cat < in", "ls $(pwd)", "ls `pwd`", "find . -delete",
     "find . -exec rm {} +", "rg --pre cat foo", "git push", "git -c core.pager=sh log", "git log --output=f",
     "sed -i s/a/b/ f", "sort -o out in", "FOO=1 ls", "/bin/ls", "(ls)", "ls &", "python -c 1", "bash -c ls",
     "ls 'unbalanced", "ls\nrm x", ""],
)
def test_anything_else_is_not_known_safe(cmd: str) -> None:
    assert not is_known_safe(cmd)


@pytest.mark.parametrize(
    ("exit_code", "output", "hint"),
    [
        (1, "touch: cannot touch '/etc/x': Read-only file system\n",
         "touch: cannot touch '/etc/x': Read-only file system"),
        (6, "curl: (6) Could not resolve host: example.com\n", "curl: (6) Could not resolve host: example.com"),
        (1, "ok\nssh: connect: Network is unreachable\n", "ssh: connect: Network is unreachable"),
        (2, "SyntaxError: invalid syntax\n", None),
        (0, "Permission denied (but it worked)\n", None),
        (None, "Permission denied\n", None),
    ],
)
def test_sandbox_denials_are_recognised_in_failed_output(exit_code: int | None, output: str, hint: str | None) -> None:
    assert denial_hint(exit_code, output) == hint


def test_a_request_reads_as_json_for_the_event(tmp_path: Path) -> None:
    request = ta.ApprovalRequest(
        ta.ApprovalKind.FILE_CHANGE, "approval-1", "call-1/code-1", 3, tmp_path, "the sandbox is read-only",
        changes=(ta.ChangedFile("a.txt", "add"), ta.ChangedFile("b.txt", "update", move_to="c.txt")),
    )
    assert request.to_json() == {
        "approval_id": "approval-1", "kind": "file_change", "call_id": "call-1/code-1", "cwd": str(tmp_path),
        "reason": "the sandbox is read-only",
        "changes": [{"path": "a.txt", "kind": "add"}, {"path": "b.txt", "kind": "update", "move_to": "c.txt"}],
    }


@pytest.mark.parametrize(
    ("build", "message"),
    [
        (lambda: ta.Approvals(ta.ApprovalPolicy.ON_REQUEST), "there is no hook to answer"),
        (lambda: ta.Approvals("sometimes"), "approval policy must be"),
        (lambda: ta.Approvals(hook=print, timeout=0), "positive, finite number of seconds"),  # type: ignore[arg-type]
        (lambda: ta.Sandbox("sealed"), "sandbox mode must be"),
        (lambda: ta.Sandbox(writable_roots=["relative/dir"]), "not an existing absolute directory"),
        (lambda: ta.Sandbox(writable_roots="/tmp"), "a single path"),
        (lambda: ta.Sandbox(network="yes"), "Sandbox.network must be True or False"),  # type: ignore[arg-type]
    ],
)
def test_invalid_settings_are_config_errors(build: object, message: str) -> None:
    with pytest.raises(ta.ConfigError, match=message):
        build()  # type: ignore[operator]


def test_agent_config_takes_bare_modes_and_policies(tmp_path: Path) -> None:
    config = ta.AgentConfig(auth="k", workspace=tmp_path, sandbox="read-only", approval=ta.ApprovalPolicy.NEVER)
    assert config.sandbox == ta.Sandbox(ta.SandboxMode.READ_ONLY)
    assert config.approval == ta.Approvals()
    default = ta.AgentConfig(auth="k", workspace=tmp_path)
    assert default.sandbox is None and default.approval.policy is NEVER
    with pytest.raises(ta.ConfigError, match="there is no hook to answer"):
        ta.AgentConfig(auth="k", workspace=tmp_path, approval="untrusted")
