"""The third-party Responses servers under test, each installed by ``.ci/servers`` into a
virtualenv of its own (pinned), and started here as a real subprocess on 127.0.0.1, in
front of the scripted Chat Completions backend (``_chat_backend``):

- **LiteLLM proxy** (``litellm[proxy]``): a model ``backend-model`` routed as
  ``custom_openai/backend-model`` -- a provider with no Responses API of its own, so
  LiteLLM bridges ``/v1/responses`` to the backend's ``/v1/chat/completions``
  (``openai/`` and ``hosted_vllm/`` would forward ``/v1/responses`` as it is). Its
  master key is the key clients send; ``LITELLM_LOCAL_MODEL_COST_MAP`` keeps it off the
  network.
- **codex-bridge-python** (its server, ``--port``/``--upstream``, not its Codex launch):
  ``/v1/responses`` translated to the backend's ``/v1/chat/completions``, a full replay
  of ``function_call``/``function_call_output`` items included; any other path is 404.
  (open-responses-server 0.4.1 was tried first: it drops ``function_call`` items, so a
  stateless tool loop never shows the backend its tool output -- docs/compatibility.md.)

``start_*`` returns once the server answers its health endpoint (polled, bounded);
``Server.stop()`` kills its process group and reaps it.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

__all__ = ["API_KEY", "CODEX_BRIDGE_VERSION", "LITELLM_VERSION", "MODEL", "SDK_CONTROL", "VENVS", "Server",
           "free_port", "litellm_python", "missing", "start_codex_bridge", "start_litellm"]

VENVS = Path(__file__).resolve().parent / ".venvs"
#: Pinned in .ci/servers.
LITELLM_VERSION = "1.106.12"
CODEX_BRIDGE_VERSION = "0.1.5"
MODEL = "backend-model"
#: What clients send; LiteLLM's master key (it refuses to start without one).
API_KEY = "sk-test"
_BACKEND_KEY = "sk-backend"  # what the servers send the backend (it ignores it)
_STARTUP_SECONDS = 120.0  # LiteLLM takes ~15 s alone on 2 cores; more when the suite shares them


def litellm_python() -> Path:
    return VENVS / "litellm" / "bin" / "python"


def _litellm_command() -> Path:
    return VENVS / "litellm" / "bin" / "litellm"


def _codex_bridge_command() -> Path:
    return VENVS / "codex-bridge-python" / "bin" / "codex-bridge-python"


def _installed_version(venv: str, dist: str) -> str | None:
    python = VENVS / venv / "bin" / "python"
    if not python.is_file():
        return None
    found = subprocess.run(
        [str(python), "-c", f"from importlib.metadata import version; print(version({dist!r}))"],
        capture_output=True, text=True, check=False, timeout=60,
    )
    return found.stdout.strip() if found.returncode == 0 else None


def missing() -> list[str]:
    """What of the servers is not installed at its pinned version (empty: all are)."""
    gaps = []
    if _installed_version("litellm", "litellm") != LITELLM_VERSION or not _litellm_command().is_file():
        gaps.append(f"litellm[proxy]=={LITELLM_VERSION} in {VENVS / 'litellm'}")
    if (_installed_version("codex-bridge-python", "codex-bridge-python") != CODEX_BRIDGE_VERSION
            or not _codex_bridge_command().is_file()):
        gaps.append(f"codex-bridge-python=={CODEX_BRIDGE_VERSION} in {VENVS / 'codex-bridge-python'}")
    return gaps


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@dataclass
class Server:
    name: str
    process: subprocess.Popen[bytes]
    port: int
    #: The base URL a client is given (``http://127.0.0.1:PORT/v1``).
    api_base: str
    log: Path

    @property
    def root(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def log_tail(self, size: int = 6000) -> str:
        text = self.log.read_text(errors="replace") if self.log.exists() else ""
        return text[-size:]

    def stop(self) -> None:
        """Kill the server's process group, reap it, and check by pid that it is gone."""
        pid = self.process.pid
        try:
            os.killpg(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.process.wait(timeout=30)
        deadline = time.monotonic() + 30
        while True:  # its group's other processes (workers) are reaped by their new parent
            try:
                os.killpg(pid, 0)
            except ProcessLookupError:
                break
            if time.monotonic() > deadline:
                raise AssertionError(f"{self.name}'s process group {pid} outlived SIGKILL")
            time.sleep(0.05)
        assert not Path(f"/proc/{pid}").exists(), f"{self.name} (pid {pid}) is still there"


def _start(name: str, command: Callable[[int], list[str]], env: dict[str, str], cwd: Path, health: str) -> Server:
    """Start ``command(port)`` on a free port; another one if that port was taken meanwhile
    (a free port is only free until someone binds it: xdist's workers start servers too)."""
    for attempt in range(3):
        port = free_port()
        log = cwd / f"{name}-{attempt}.log"
        with log.open("wb") as out:
            process = subprocess.Popen(command(port), cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=out,
                                       stderr=subprocess.STDOUT, start_new_session=True)
        server = Server(name, process, port, f"http://127.0.0.1:{port}/v1", log)
        try:
            _wait_healthy(server, health)
        except _PortTaken:
            server.stop()
            continue
        except BaseException:
            server.stop()
            raise
        return server
    raise RuntimeError(f"{name}: three free ports were taken before it could bind one")


class _PortTaken(Exception):
    pass


def _wait_healthy(server: Server, path: str) -> None:
    """Poll ``path`` until it answers 200 (an outside process: a bounded deadline)."""
    deadline = time.monotonic() + _STARTUP_SECONDS
    url = server.root + path
    while True:
        if server.process.poll() is not None:
            if "address already in use" in server.log_tail().lower():
                raise _PortTaken(server.port)
            raise RuntimeError(f"{server.name} exited ({server.process.returncode}) while starting:\n"
                               f"{server.log_tail()}")
        try:
            with urllib.request.urlopen(url, timeout=2) as answer:
                if answer.status == 200:
                    return
        except (OSError, urllib.error.URLError):
            pass
        if time.monotonic() > deadline:
            raise RuntimeError(f"{server.name} did not answer {url} within {_STARTUP_SECONDS:.0f} s:\n"
                               f"{server.log_tail()}")
        time.sleep(0.1)


def _base_env(home: Path) -> dict[str, str]:
    """A clean environment: none of ours (no OPENAI_* of the developer, no proxies)."""
    return {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(home), "LANG": "C.UTF-8",
            "PYTHONUNBUFFERED": "1", "NO_PROXY": "127.0.0.1,localhost"}


def start_litellm(backend_url: str, workdir: Path) -> Server:
    """LiteLLM's proxy with one model bridged to ``backend_url`` (``http://127.0.0.1:P/v1``)."""
    config = {
        "model_list": [{
            "model_name": MODEL,
            "litellm_params": {"model": f"custom_openai/{MODEL}", "api_base": backend_url, "api_key": _BACKEND_KEY},
        }],
    }
    (workdir / "litellm.yaml").write_text(json.dumps(config, indent=1))  # YAML is a superset of JSON
    env = _base_env(workdir) | {
        "LITELLM_MASTER_KEY": API_KEY,
        # Its bundled model cost map: without this, importing LiteLLM fetches one from
        # GitHub (three attempts, ~8 s) before falling back to the bundled copy.
        "LITELLM_LOCAL_MODEL_COST_MAP": "True",
        "LITELLM_LOG": "INFO",
    }

    def command(port: int) -> list[str]:
        return [str(_litellm_command()), "--config", str(workdir / "litellm.yaml"), "--host", "127.0.0.1",
                "--port", str(port)]

    return _start("litellm", command, env, workdir, "/health/liveliness")


def start_codex_bridge(backend_url: str, workdir: Path) -> Server:
    """codex-bridge-python's server (not its three-argument Codex launch) in front of
    ``backend_url``: ``/v1/responses`` translated to ``{backend_url}/chat/completions``."""
    env = _base_env(workdir) | {"CODEX_BRIDGE_API_KEY": _BACKEND_KEY,
                                "CODEX_BRIDGE_HISTORY_DIR": str(workdir / "history")}

    def command(port: int) -> list[str]:  # it always binds 127.0.0.1
        return [str(_codex_bridge_command()), "--port", str(port), "--upstream", backend_url]

    return _start("codex-bridge-python", command, env, workdir, "/v1/models")


#: The positive control, run by the LiteLLM venv's Python (it has the official ``openai``
#: SDK): one streamed ``responses.create`` with a function tool; prints the completed
#: response's output items as JSON. argv: base URL, model, API key.
SDK_CONTROL = """
import json, sys
from openai import OpenAI
client = OpenAI(base_url=sys.argv[1], api_key=sys.argv[3], max_retries=0, timeout=60)
tool = {"type": "function", "name": "get_weather", "description": "The weather in a city.",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"],
                       "additionalProperties": False}, "strict": True}
kinds, completed = [], None
with client.responses.create(model=sys.argv[2], input="What is the weather in Paris?", tools=[tool],
                             stream=True) as stream:
    for event in stream:
        kinds.append(event.type)
        if event.type == "response.completed":
            completed = event.response
print(json.dumps({"kinds": kinds, "output": [item.model_dump() for item in completed.output] if completed else None}))
"""
