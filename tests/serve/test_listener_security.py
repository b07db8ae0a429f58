"""Who may drive ``trio-agent serve --listen`` (issue 21, hole 2): a web page may not (a
handshake with an ``Origin`` is refused with 403 unless ``--allow-origin`` names it),
a capability token is checked on every handshake (401 without it or with another),
and the command refuses to listen beyond loopback without one.

The attack of the issue: a page's handshake (``Origin: https://evil.example``) started
a ``danger-full-access`` thread and ran a command. Each refusal is checked on the wire
-- the HTTP status, before any JSON-RPC -- and by its effect (no thread started, no
file written), beside its positive control: the same client allowed where it should
be runs a full thread/start and turn. In process on 127.0.0.1:0 with the built-in
local model, and through the ``trio-agent serve`` command where the CLI decides.
"""

from __future__ import annotations

import hashlib
import signal
from pathlib import Path

import pytest
import trio
import trio_websocket

from trio_agent._serve import ListenerPolicy
from trio_agent._serve._listen_policy import is_loopback, normalise_origin
from trio_agent.testing import AppServerClient, WebSocketChannel

from ..cli._cli import cli_env, open_cli, run_cli
from ._harness import text_input
from ._live import STEP, HttpAnswer, handshake, http_exchange, websocket_server
from ._schema import validate_server_message

TOKEN = "s3cret-capability-token"
EVIL = "https://evil.example"


async def drive_a_command(client: AppServerClient, workspace: Path, name: str) -> None:
    """What the attacking page did: a danger-full-access thread that runs a command."""
    await client.initialize(name="attacker-or-user")
    started = await client.request("thread/start", {"sandbox": "danger-full-access", "cwd": str(workspace)})
    turn = await client.request("turn/start", {"threadId": started["thread"]["id"],
                                               "input": text_input(f"run: touch {name}")})
    done = await client.read_notification("turn/completed", lambda p: p["turn"]["id"] == turn["turn"]["id"])
    assert done["turn"]["status"] == "completed"


async def connect_and_drive(port: int, workspace: Path, name: str, headers: list[tuple[str, str]]) -> None:
    async with trio_websocket.open_websocket_url(f"ws://127.0.0.1:{port}", extra_headers=headers) as ws:
        with trio.fail_after(STEP):
            await drive_a_command(AppServerClient(WebSocketChannel(ws), validate=validate_server_message),
                                  workspace, name)


async def loaded_threads(port: int, headers: list[tuple[str, str]] | None = None) -> list[str]:
    """What a client that is allowed in sees: the loaded threads."""
    async with trio_websocket.open_websocket_url(f"ws://127.0.0.1:{port}", extra_headers=headers or []) as ws:
        client = AppServerClient(WebSocketChannel(ws))
        await client.initialize(name="observer")
        return (await client.request("thread/loaded/list"))["data"]  # type: ignore[no-any-return]


async def refused(port: int, headers: list[tuple[str, str]], path: str = "/", then: bytes = b"") -> HttpAnswer:
    """The answer to a WebSocket handshake with ``headers`` (and ``then`` right after it)."""
    answer = await http_exchange(port, handshake(path, *(f"{name}: {value}" for name, value in headers)) + then)
    assert answer is not None and answer.status != 101, "the handshake was accepted"
    return answer


def dirs(tmp_path: Path) -> tuple[Path, Path]:
    workspace, home = tmp_path / "workspace", tmp_path / "home"
    workspace.mkdir()
    return workspace, home


# -- Origin -------------------------------------------------------------------------------


async def test_a_web_page_origin_is_refused_before_any_json_rpc(tmp_path: Path) -> None:
    workspace, home = dirs(tmp_path)
    async with websocket_server(home, workspace) as port:
        # The page's bytes: the refusal is the whole answer, JSON-RPC after it goes nowhere.
        rejected = await refused(port, [("Origin", EVIL)], then=b'{"id":1,"method":"initialize","params":{}}')
        assert rejected.status == 403 and b"Origin https://evil.example may not connect" in rejected.body
        assert b"jsonrpc" not in rejected.body
        assert await loaded_threads(port) == []  # no thread was started
        # Positive control: the same client without an Origin (a program, not a page) is served.
        await connect_and_drive(port, workspace, "by-a-program", [])
    assert (workspace / "by-a-program").exists()


async def test_an_allowed_origin_is_served_and_matched_exactly(tmp_path: Path) -> None:
    workspace, home = dirs(tmp_path)
    policy = ListenerPolicy(frozenset({"https://app.example:8443"}))
    async with websocket_server(home, workspace, policy) as port:
        # Scheme and host case do not matter; a different port, scheme or host is another origin.
        await connect_and_drive(port, workspace, "from-the-app", [("Origin", "HTTPS://App.Example:8443")])
        for other in ("https://app.example", "http://app.example:8443", "https://app.example.evil:8443", "null"):
            assert (await refused(port, [("Origin", other)])).status == 403, other
    assert (workspace / "from-the-app").exists()


# -- capability token ---------------------------------------------------------------------


async def test_a_capability_token_is_required_on_every_handshake(tmp_path: Path) -> None:
    workspace, home = dirs(tmp_path)
    async with websocket_server(home, workspace, ListenerPolicy.with_token(TOKEN)) as port:
        missing = await refused(port, [], then=b'{"id":1,"method":"initialize","params":{}}')
        wrong = await refused(port, [("Authorization", f"Bearer {TOKEN}x")])
        assert (missing.status, wrong.status) == (401, 401)
        assert b"no capability token" in missing.body and b"a wrong capability token" in wrong.body
        assert missing.headers["www-authenticate"] == "Bearer" and b"jsonrpc" not in missing.body
        for header in (f"Basic {TOKEN}", "Bearer", TOKEN, f"Bearer {TOKEN[:-1]}"):  # not the bearer token
            assert (await refused(port, [("Authorization", header)])).status == 401, header
        two = [("Authorization", f"Bearer {TOKEN}"), ("Authorization", f"Bearer {TOKEN}")]
        assert (await refused(port, two)).status == 401
        # A page with the right token is still a page.
        assert (await refused(port, [("Authorization", f"Bearer {TOKEN}"), ("Origin", EVIL)])).status == 403
        authorized = [("Authorization", f"Bearer {TOKEN}")]
        assert await loaded_threads(port, authorized) == []  # nothing ran before the right token
        await connect_and_drive(port, workspace, "with-the-token", authorized)
    assert (workspace / "with-the-token").exists()


async def test_health_checks_answer_without_the_token_and_open_nothing_else(tmp_path: Path) -> None:
    workspace, home = dirs(tmp_path)
    async with websocket_server(home, workspace, ListenerPolicy.with_token(TOKEN)) as port:
        for path in ("/healthz", "/readyz", "/readyz?verbose=1"):
            answer = await http_exchange(port, f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".encode())
            assert answer is not None and (answer.status, answer.body) == (200, b"ok\n"), path
        # A WebSocket handshake on a health path is a handshake: the token is still required.
        assert (await refused(port, [], "/healthz")).status == 401
        assert (await refused(port, [("Origin", EVIL)], "/readyz")).status == 403
        plain = await http_exchange(port, b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        assert plain is not None and plain.status == 401  # no token: nothing but the health answer
        garbage = await http_exchange(port, b"\x16\x03\x01 not http at all\r\n\r\n")
        assert garbage is not None and garbage.status == 400


def test_policy_values() -> None:
    assert normalise_origin("HTTPS://Example.COM:443") == "https://example.com:443"
    assert normalise_origin("vscode-webview://abc") == "vscode-webview://abc"
    for bad in ("null", "https://x.example/", "https://user@x.example", "x.example", "https://x.example:99999"):
        with pytest.raises(ValueError, match="scheme://host"):
            normalise_origin(bad)
    assert [is_loopback(h) for h in ("127.0.0.1", "127.8.9.1", "::1", "localhost", "LOCALHOST.", "::ffff:127.0.0.1")
            ] == [True] * 6
    assert not any(is_loopback(h) for h in ("0.0.0.0", "::", "192.168.1.2", "example.com", "10.0.0.1"))
    policy = ListenerPolicy.with_token(TOKEN)
    assert policy.token_sha256 == hashlib.sha256(TOKEN.encode()).digest()
    assert policy.token_accepted(TOKEN.encode()) and not policy.token_accepted(TOKEN.encode()[:-1])
    with pytest.raises(ValueError, match="empty"):
        ListenerPolicy.with_token("")


# -- the command ----------------------------------------------------------------------------


def port_of(stderr: str) -> int | None:
    for line in stderr.splitlines():
        if "listening on ws://" in line:
            return int(line.rsplit(":", 1)[1])
    return None


async def test_the_command_refuses_a_non_loopback_address_without_auth(tmp_path: Path) -> None:
    done = await run_cli("serve", "--local", "--home", str(tmp_path / "home"), "--listen", "ws://0.0.0.0:0",
                         cwd=tmp_path, seconds=STEP)
    assert done.returncode == 2 and done.stdout == b""
    said = done.stderr.decode().splitlines()
    assert len(said) == 1 and "refusing to listen on 0.0.0.0 without authentication" in said[0], said
    assert "--ws-auth capability-token" in said[0]  # what to do
    assert not (tmp_path / "home").exists()  # nothing started


async def test_the_command_listens_beyond_loopback_with_a_token(tmp_path: Path) -> None:
    """The positive control of the refusal: 0.0.0.0 with ``--ws-auth`` listens, and only
    the right token is served."""
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    env = cli_env(SERVE_TOKEN=TOKEN)
    async with open_cli("serve", "--local", "--home", str(tmp_path / "home"), "--listen", "ws://0.0.0.0:0",
                        "--ws-auth", "capability-token", "--ws-token-env", "SERVE_TOKEN", cwd=tmp_path,
                        env=env) as cli:
        await cli.wait_for(lambda c: port_of(c.stderr) is not None, STEP)
        port = port_of(cli.stderr)
        assert port is not None and "any local user" not in cli.stderr
        assert (await refused(port, [])).status == 401
        await connect_and_drive(port, workspace, "remote-with-token", [("Authorization", f"Bearer {TOKEN}")])
        cli.signal(signal.SIGINT)
    assert cli.process.returncode == 0
    assert (workspace / "remote-with-token").exists()


async def test_the_command_on_loopback_refuses_a_page_and_warns_once(tmp_path: Path) -> None:
    """The issue's reproduction through the command: ``--listen ws://127.0.0.1:0`` with
    no options. The page is refused and nothing runs; a program is served; stderr says
    in one line that any local user can connect and how to require a token."""
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    async with open_cli("serve", "--local", "--home", str(tmp_path / "home"), "--listen", "ws://127.0.0.1:0",
                        cwd=tmp_path) as cli:
        await cli.wait_for(lambda c: "any local user" in c.stderr, STEP)
        port = port_of(cli.stderr)
        assert port is not None
        assert (await refused(port, [("Origin", EVIL)])).status == 403
        assert await loaded_threads(port) == []
        await connect_and_drive(port, workspace, "local-program", [])
        cli.signal(signal.SIGINT)
    assert cli.process.returncode == 0
    warnings = [line for line in cli.stderr.splitlines() if "any local user" in line]
    assert len(warnings) == 1 and "--ws-auth capability-token" in warnings[0]
    assert (workspace / "local-program").exists()


async def test_the_command_reads_a_private_token_file(tmp_path: Path) -> None:
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    token_file = tmp_path / "token"
    token_file.write_text(f"  {TOKEN}  \nsecond line ignored\n")
    token_file.chmod(0o644)
    command = ["serve", "--local", "--home", str(tmp_path / "home"), "--listen", "ws://127.0.0.1:0",
               "--ws-auth", "capability-token", "--ws-token-file", str(token_file)]
    shared = await run_cli(*command, cwd=tmp_path, seconds=STEP)
    assert shared.returncode == 2
    assert f"--ws-token-file {token_file} is open to group or others (mode 0644)" in shared.stderr.decode()
    assert f"chmod 600 {token_file}" in shared.stderr.decode()
    token_file.chmod(0o600)
    async with open_cli(*command, cwd=tmp_path) as cli:
        await cli.wait_for(lambda c: port_of(c.stderr) is not None, STEP)
        port = port_of(cli.stderr)
        assert port is not None
        assert (await refused(port, [("Authorization", "Bearer second line ignored")])).status == 401
        await connect_and_drive(port, workspace, "from-file-token", [("Authorization", f"Bearer {TOKEN}")])
        cli.signal(signal.SIGINT)
    assert (workspace / "from-file-token").exists()


@pytest.mark.parametrize(("options", "said"), [
    (["--ws-auth", "capability-token"], "takes exactly one of --ws-token-file PATH"),
    (["--ws-token-env", "X"], "--ws-token-env needs --ws-auth capability-token"),
    (["--ws-auth", "capability-token", "--ws-token-env", "UNSET_FOR_SURE"], "the variable is unset or empty"),
    (["--ws-auth", "capability-token", "--ws-token-sha256", "abc"], "64 hex digits"),
    (["--ws-auth", "capability-token", "--ws-token-file", "/nonexistent/token"], "cannot read it"),
    (["--allow-origin", "https://x.example/"], "--allow-origin: an origin is scheme://host[:port]"),
])
async def test_the_command_says_what_is_wrong_with_its_listener_options(tmp_path: Path, options: list[str],
                                                                        said: str) -> None:
    done = await run_cli("serve", "--local", "--listen", "ws://127.0.0.1:0", *options, cwd=tmp_path, seconds=STEP)
    assert done.returncode == 2 and said in done.stderr.decode(), done.stderr.decode()
    assert len(done.stderr.decode().splitlines()) == 1


async def test_an_empty_token_file_is_refused(tmp_path: Path) -> None:
    token_file = tmp_path / "token"
    token_file.write_text("\n")
    token_file.chmod(0o600)
    done = await run_cli("serve", "--local", "--listen", "ws://127.0.0.1:0", "--ws-auth", "capability-token",
                         "--ws-token-file", str(token_file), cwd=tmp_path, seconds=STEP)
    assert done.returncode == 2 and "the first line is empty" in done.stderr.decode()


async def test_the_sha256_of_the_token_is_enough(tmp_path: Path) -> None:
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    digest = hashlib.sha256(TOKEN.encode()).hexdigest()
    async with open_cli("serve", "--local", "--home", str(tmp_path / "home"), "--listen", "ws://127.0.0.1:0",
                        "--ws-auth", "capability-token", "--ws-token-sha256", digest, cwd=tmp_path) as cli:
        await cli.wait_for(lambda c: port_of(c.stderr) is not None, STEP)
        port = port_of(cli.stderr)
        assert port is not None
        assert (await refused(port, [("Authorization", f"Bearer {digest}")])).status == 401
        await connect_and_drive(port, workspace, "by-digest", [("Authorization", f"Bearer {TOKEN}")])
        cli.signal(signal.SIGINT)
    assert (workspace / "by-digest").exists()


@pytest.mark.parametrize("options", [["--allow-origin", "https://x.example"], ["--ws-token-env", "X"],
                                     ["--ws-auth", "capability-token", "--ws-token-env", "X"]])
async def test_listener_options_without_a_listener_are_refused(tmp_path: Path, options: list[str]) -> None:
    """On stdio they would mean nothing: saying so beats ignoring an intended protection."""
    done = await run_cli("serve", "--local", *options, cwd=tmp_path, seconds=STEP, stdin=b"")
    assert done.returncode == 2 and f"{options[0]} applies to the WebSocket listener" in done.stderr.decode()
    assert done.stdout == b""
