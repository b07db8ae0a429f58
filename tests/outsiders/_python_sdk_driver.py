"""The official Python SDK (``openai_codex``) as its users drive it, against whatever
``codex_bin`` it is given; run as a script by ``test_python_sdk`` (the SDK is
synchronous and starts threads of its own, so it runs in a process of its own).

``python _python_sdk_driver.py SPEC_JSON`` where SPEC is ``{codex_bin, cwd, env,
config, scenario, mark}``; prints one JSON object: what each step returned."""

from __future__ import annotations

import json
import sys
from typing import Any

from openai_codex import Codex, CodexConfig, CodexError
from openai_codex.models import UnknownNotification

Json = dict[str, Any]


def _turn(thread: Any, text: str) -> Json:
    """One turn through ``turn().stream()``: its notifications, commands and result."""
    handle = thread.turn(text)
    unknown, commands, completed = [], [], None
    for note in handle.stream():
        if isinstance(note.payload, UnknownNotification):  # the SDK's pydantic models refused it
            unknown.append(note.method)
        elif note.method == "item/completed":
            item = note.payload.model_dump(by_alias=True, mode="json")["item"]
            if item["type"] == "commandExecution":
                commands.append({key: item.get(key) for key in ("command", "exitCode", "aggregatedOutput", "status")})
        elif note.method == "turn/completed":
            completed = note.payload.model_dump(by_alias=True, mode="json")["turn"]
    return {"unknown": unknown, "commands": commands, "status": completed and completed["status"]}


def _result(result: Any) -> Json:
    return {"status": result.status.value, "final": result.final_response, "usage": result.usage is not None}


def _turn_ids(thread: Any) -> list[str]:
    return [turn.id for turn in thread.read(include_turns=True).thread.turns]


def scenario(codex: Codex, spec: Json) -> Json:
    out: Json = {"user_agent": codex.metadata.userAgent, "version": codex.metadata.serverInfo.version}
    thread = codex.thread_start(cwd=spec["cwd"])
    out["thread_id"] = thread.id
    out["hello"] = _result(thread.run("hello"))
    if spec["scenario"] == "short":
        return out
    out["command"] = _turn(thread, f"run: echo {spec['mark']}")
    read = thread.read(include_turns=True).thread
    out["read"] = {"id": read.id, "turns": [turn.status.value for turn in read.turns], "preview": read.preview}
    out["list"] = [entry.id for entry in codex.thread_list(limit=10).data]
    resumed = codex.thread_resume(thread.id)
    out["resumed"] = {"id": resumed.id, "turns": _turn_ids(resumed)}
    out["resumed_without_turns"] = codex.thread_resume(thread.id, include_turns=False).id  # excludeTurns: gated
    out["after_resume"] = _result(resumed.run("after resume"))
    forked = codex.thread_fork(thread.id)
    out["fork"] = {"id": forked.id, "run": _result(forked.run("in the fork")), "turns": _turn_ids(forked),
                   "source_turns": _turn_ids(thread)}
    out["compact"] = thread.compact().model_dump(mode="json")
    try:
        thread.run("a turn with a source", source="sdk")  # turnTrigger: not in this server's schema
        out["gated"] = None
    except CodexError as exc:
        out["gated"] = str(exc)
    out["models"] = [model.id for model in codex.models().data]
    return out


def extra(codex: Codex, spec: Json) -> Json:
    """The rest of the SDK's surface: names, archive, per-turn options, the account."""
    thread = codex.thread_start(cwd=spec["cwd"])
    thread.run("hello")
    thread.set_name("sdk-named")
    out: Json = {"name": thread.read().thread.name}
    out["output_schema"] = thread.run("structured", output_schema={
        "type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"],
        "additionalProperties": False}).status.value
    out["model"] = thread.run("another model", model="gpt-5.4").status.value
    codex.thread_archive(thread.id)
    out["listed"] = thread.id in [entry.id for entry in codex.thread_list().data]
    out["archived"] = thread.id in [entry.id for entry in codex.thread_list(archived=True).data]
    out["unarchived"] = codex.thread_unarchive(thread.id).id
    out["account"] = codex.account().model_dump(mode="json", by_alias=True)
    codex.login_api_key("sk-sdk-login")  # the key of threads started from now on
    out["after_login"] = _result(codex.thread_start(cwd=spec["cwd"]).run("signed in"))
    codex.logout()
    return out


def main() -> None:
    spec = json.loads(sys.argv[1])
    config = CodexConfig(codex_bin=spec["codex_bin"], cwd=spec["cwd"], env=spec["env"],
                         config_overrides=tuple(spec["config"]))
    with Codex(config) as codex:
        print(json.dumps(extra(codex, spec) if spec["scenario"] == "extra" else scenario(codex, spec)), flush=True)


if __name__ == "__main__":
    main()
