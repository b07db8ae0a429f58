"""Credential scrubbing for ``exec_command``: which variables are dropped, which strings
are redacted, and that a real command sees neither (table-driven)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import trio

from trio_agent._tools._shell_env import REDACTED, build_environment, is_secret_name, url_credentials
from trio_agent._tools.exec_command import ShellSessions

SECRET_NAMES = [
    # the name-part rule
    "GITHUB_TOKEN", "MY_API_KEY", "db_password", "SESSION_COOKIE", "SENTRY_DSN", "GITHUB_PAT",
    "SLACK_WEBHOOK_URL", "CI_JOB_JWT", "BORG_PASSPHRASE", "RABBITMQ_DEFAULT_PASS", "GOOGLE_APIKEY",
    # the suffix rule
    "PGPASSWORD", "NGROK_AUTHTOKEN", "STRIPE_APIKEY", "X_APIKEY", "P4PASSWD", "AZURE_CLIENTSECRET",
    "CSRFTOKEN",
    # a PWD part beside others
    "MYSQL_PWD", "DB_PWD",
    # well-known names
    "SSHPASS", "SONAR_LOGIN",
]  # fmt: skip

PLAIN_NAMES = [
    "PATH", "HOME", "PWD", "OLDPWD", "KEYBOARD", "KEYBOARD_LAYOUT", "MONKEY", "PASSWORDLESS",
    "TOKENIZER_DIR", "PATCH_LEVEL", "PATHEXT", "LOGIN_SHELL", "DSNAME", "HISTFILE",
]  # fmt: skip


@pytest.mark.parametrize("name", SECRET_NAMES)
def test_credential_names_are_recognised(name: str) -> None:
    assert is_secret_name(name)


@pytest.mark.parametrize("name", PLAIN_NAMES)
def test_ordinary_names_are_kept(name: str) -> None:
    assert not is_secret_name(name)


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("postgres://admin:hunter2-long@db:5432/app", ("admin:hunter2-long", "hunter2-long")),
        ("redis://:s3cret-redis@cache:6379/0", (":s3cret-redis", "s3cret-redis")),
        ("https://user:p%40ss%3Aword@proxy:3128", ("user:p%40ss%3Aword", "p%40ss%3Aword", "p@ss:word")),
        ("amqp://a:one@h1,amqp://b:two@h2", ("a:one", "one", "b:two", "two")),
        ("mysql://root:pw@localhost/db?sslmode=require", ("root:pw", "pw")),
        ("https://token@github.com/org/repo", ()),  # no password: kept (use a *_TOKEN name)
        ("https://example.com/a:b@c", ()),  # ':' and '@' after the host are not userinfo
        ("user:password@host", ()),  # no scheme: not a URL
        ("plain value", ()),
    ],
)
def test_url_credentials(value: str, expected: tuple[str, ...]) -> None:
    assert url_credentials(value) == expected


@pytest.mark.parametrize(
    ("name", "value", "redacted"),
    [
        ("PGPASSWORD", "pg-secret-123", ["pg-secret-123"]),
        ("MYSQL_PWD", "mysql-secret-456", ["mysql-secret-456"]),
        ("ACME_APIKEY", "apikey-secret-789", ["apikey-secret-789"]),
        ("DATABASE_URL", "postgres://app:db-secret-000@db/app", ["postgres://app:db-secret-000@db/app",
                                                                  "app:db-secret-000", "db-secret-000"]),
        ("REDIS_URL", "redis://:redis-secret-1@cache:6379", ["redis://:redis-secret-1@cache:6379",
                                                              ":redis-secret-1", "redis-secret-1"]),
        ("HTTPS_PROXY", "http://me:proxy-secret@proxy:3128", ["http://me:proxy-secret@proxy:3128",
                                                               "me:proxy-secret", "proxy-secret"]),
        ("MYSQL_PWD", "short", []),  # too short to redact without blanking ordinary words
        ("DATABASE_URL", "postgres://u:pw@h/d", ["postgres://u:pw@h/d"]),  # the short parts alone are not
    ],
)  # fmt: skip
def test_scrubbed_variables_are_dropped_and_their_secrets_collected(
    name: str, value: str, redacted: list[str]
) -> None:
    environment = build_environment({name: value, "PATH": "/bin"})
    assert name not in environment.env
    assert environment.env["PATH"] == "/bin"
    assert sorted(environment.secrets) == sorted(redacted)
    assert list(environment.secrets) == sorted(redacted, key=lambda secret: (-len(secret), secret))


def test_overrides_are_neither_scrubbed_nor_redacted() -> None:
    environment = build_environment({}, {"DATABASE_URL": "postgres://app:given-by-caller@db/app"})
    assert environment.env["DATABASE_URL"] == "postgres://app:given-by-caller@db/app"
    assert environment.secrets == ()


@pytest.fixture
async def shell(nursery: trio.Nursery, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[ShellSessions]:
    for name, value in LEAKS.items():
        monkeypatch.setenv(name, value)
    sessions = ShellSessions(nursery, tmp_path)
    try:
        yield sessions
    finally:
        await sessions.aclose()


LEAKS = {
    "PGPASSWORD": "pg-secret-123",
    "MYSQL_PWD": "mysql-secret-456",
    "ACME_APIKEY": "apikey-secret-789",
    "DATABASE_URL": "postgres://app:db-secret-000@db/app",
    "REDIS_URL": "redis://:redis-secret-1@cache:6379",
}


@pytest.mark.parametrize("name", sorted(LEAKS))
async def test_a_command_sees_no_credential_and_its_output_is_redacted(shell: ShellSessions, name: str) -> None:
    value = LEAKS[name]
    # The command cannot read the variable; printing the value another way is redacted.
    cmd = f"echo \"var=[${{{name}:-unset}}]\"; env | grep -c '^{name}=' ; printf '%s\\n' '{value}'"
    result = await shell.exec_command({"cmd": cmd, "login": False})
    assert result["output"].splitlines() == ["var=[unset]", "0", REDACTED]


async def test_a_password_printed_apart_from_its_url_is_redacted(shell: ShellSessions) -> None:
    cmd = "echo 'login app db-secret-000'; echo 'auth :redis-secret-1'; echo 'postgres://app:db-secret-000@other/x'"
    result = await shell.exec_command({"cmd": cmd, "login": False})
    assert result["output"].splitlines() == [
        f"login app {REDACTED}",
        f"auth {REDACTED}",
        f"postgres://{REDACTED}@other/x",
    ]
