"""A child process for ``test_mcp_process_tree``: an agent whose MCP server has a daemon.

    python -m tests.acceptance._mcp_agent_child WORKSPACE DAEMON_PID_FILE

It opens an agent (HTTPS transport, so nothing is sent to a model until a prompt,
and none comes) with ``tests/fixtures/mcp_daemon_server.py`` as its stdio MCP server,
prints ``READY <server pid>`` once the server is up and its daemon has written its pid,
and waits to be killed.
"""

from __future__ import annotations

import sys
from pathlib import Path

import trio

import trio_agent as ta

FIXTURES = Path(__file__).parent.parent / "fixtures"


async def main(workspace: str, pid_file: str) -> None:
    server_pid = Path(pid_file + ".server")
    tools = ta.Tools.default().with_mcp("daemons", ta.McpServer.stdio(
        sys.executable, [str(FIXTURES / "mcp_daemon_server.py"), pid_file, "--pid-file", str(server_pid)]))
    responses = ta.Responses(profile=ta.Profile.OPENAI,
                             transport=ta.Transport.HTTPS, api_base_url="http://127.0.0.1:9/v1")
    config = ta.AgentConfig(auth="test-key", workspace=Path(workspace), responses=responses, tools=tools)
    async with ta.open_agent(config) as agent:
        async for event in agent.events:
            if event.kind is ta.EventKind.MCP_SERVER_FAILED:
                sys.exit(f"the MCP server failed: {event.payload}")
            if event.kind is ta.EventKind.MCP_SERVER_READY:
                break
        while not Path(pid_file).exists():  # noqa: ASYNC110 - a file the daemon writes
            await trio.sleep(0.01)
        print("READY", server_pid.read_text(), flush=True)
        await trio.sleep_forever()


if __name__ == "__main__":
    trio.run(main, *sys.argv[1:3])
