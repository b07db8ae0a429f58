"""Trio tests of `CodeModeHost`: cells, nested tools, yields, timers, cancellation.

Tests that involve time use the `autojump_clock` fixture (virtual time, exact
wall times). Runaway-loop tests burn real CPU against the QuickJS step limit
and therefore run on the real clock with a short limit.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
import trio
import trio.testing

from trio_agent._tools._image_prepare import LOW_DETAIL_NOTE
from trio_agent._tools.code_mode import CodeModeHost, ExecOutput, ToolCallError

PNG = (
    "data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAQAAAC1HAwCAAAAC0lEQVR42mNk+A8AAQUBAScY"
    "42YAAAAASUVORK5CYII="
)
TOOLS = [
    ("slow", "Sleeps for a second and echoes its input", True),
    ("forever", "Never returns", True),
    ("fail", "Always fails", True),
    ("apply_patch", "Freeform patch tool", False),
    ("exec_command", "Runs a shell command", True),
    ("mcp__files__read-file", "An MCP tool", True),
]


class FakeTools:
    """A `ToolCaller` that records calls, concurrency and cancellations."""

    def __init__(self, delay: float = 1.0) -> None:
        self.delay = delay
        self.calls: list[tuple[str, object, str]] = []
        self.cancelled: list[str] = []
        self.in_flight = 0
        self.max_in_flight = 0

    async def __call__(self, name: str, args: object, call_id: str) -> object:
        self.calls.append((name, args, call_id))
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        finished = False
        try:
            if name == "forever":
                await trio.sleep_forever()
            if name == "exec_command" and isinstance(args, dict):
                await trio.sleep(float(str(args.get("seconds", self.delay))))
            else:
                await trio.sleep(self.delay)
            finished = True
        finally:
            self.in_flight -= 1
            if not finished:
                self.cancelled.append(call_id)
        if name == "fail":
            raise ToolCallError("the tool failed")
        return {"tool": name, "args": args}


@pytest.fixture
def fake() -> FakeTools:
    return FakeTools()


@pytest.fixture
async def host(nursery: trio.Nursery) -> AsyncIterator[CodeModeHost]:
    code_mode = CodeModeHost(nursery)
    yield code_mode
    await code_mode.aclose()


def texts(result: ExecOutput) -> list[str]:
    """The text of every content item after the header."""
    assert isinstance(result.output, list)
    return [str(item["text"]) for item in result.output[1:] if item["type"] == "input_text"]


def header(result: ExecOutput) -> str:
    if isinstance(result.output, str):
        return result.output
    return str(result.output[0]["text"])


# ---- output format ---------------------------------------------------------------


async def test_text_output_format_is_exact(
    host: CodeModeHost, fake: FakeTools, autojump_clock: trio.testing.MockClock
) -> None:
    result = await host.exec("call-1", 'text("hello"); text({a: 1}); text(5)', fake, TOOLS)
    assert result == ExecOutput(
        output=[
            {"type": "input_text", "text": "Script completed\nWall time 0.0 seconds\nOutput:\n"},
            {"type": "input_text", "text": "hello"},
            {"type": "input_text", "text": '{"a":1}'},
            {"type": "input_text", "text": "5"},
        ],
        notifications=(),
        cell_id=1,
        running=False,
        status="completed",
    )


async def test_no_output_is_a_plain_header_string(
    host: CodeModeHost, fake: FakeTools, autojump_clock: trio.testing.MockClock
) -> None:
    result = await host.exec("call-1", "const x = 1 + 1;", fake, TOOLS)
    assert result.output == "Script completed\nWall time 0.0 seconds\nOutput:\n"
    assert result.status == "completed"


async def test_console_log_maps_to_text(host: CodeModeHost, fake: FakeTools) -> None:
    result = await host.exec("call-1", 'console.log("a", {b: 1}, 2)', fake, TOOLS)
    assert texts(result) == ['a {"b":1} 2']


async def test_script_error_reports_name_message_and_stack(
    host: CodeModeHost, fake: FakeTools, autojump_clock: trio.testing.MockClock
) -> None:
    source = 'text("before");\nfunction boom() { throw new TypeError("bad thing"); }\nboom();'
    result = await host.exec("call-1", source, fake, TOOLS)
    assert result.status == "failed"
    assert result.running is False
    assert header(result) == "Script failed\nWall time 0.0 seconds\nOutput:\n"
    before, error = texts(result)
    assert before == "before"
    assert error.startswith("Script error:\nTypeError: bad thing\n    at boom (<input>:2:")
    assert "\n    at <anonymous> (<input>:3:" in error
    assert "start" not in error  # bootstrap frames are dropped


async def test_parse_error_fails_the_script(host: CodeModeHost, fake: FakeTools) -> None:
    result = await host.exec("call-1", "let x = ;", fake, TOOLS)
    assert result.status == "failed"
    assert texts(result) == [
        "Script error:\nSyntaxError: unexpected token in expression: ';'\n    at <input>:1:9"
    ]


async def test_source_must_be_one_function_body(host: CodeModeHost, fake: FakeTools) -> None:
    result = await host.exec("call-1", "}); (async function () {", fake, TOOLS)
    assert result.status == "failed"
    assert texts(result) == [
        "Script error:\nSyntaxError: unbalanced braces: exec source must be a function body"
    ]


async def test_pragma_line_keeps_line_numbers(host: CodeModeHost, fake: FakeTools) -> None:
    source = '// @exec: {"max_output_tokens": 100}\ntext(1);\nnull.x;'
    result = await host.exec("call-1", source, fake, TOOLS)
    assert texts(result)[1].startswith(
        "Script error:\nTypeError: cannot read property 'x' of null\n    at <anonymous> (<input>:3:"
    )


@pytest.mark.parametrize(
    ("source", "message"),
    [
        ('// @exec: {"yield": 5}\ntext(1)', "exec pragma only supports `yield_time_ms` and"),
        ('// @exec: {"yield_time_ms": 5}', "exec pragma must be followed by JavaScript source"),
        ("", "exec expects raw JavaScript source text (non-empty)."),
    ],
)
async def test_invalid_pragma_fails_without_running(
    host: CodeModeHost,
    fake: FakeTools,
    autojump_clock: trio.testing.MockClock,
    source: str,
    message: str,
) -> None:
    result = await host.exec("call-1", source, fake, TOOLS)
    assert isinstance(result.output, str)
    assert result.output.startswith("Script failed\nWall time 0.0 seconds\nOutput:\n" + message)
    assert (result.status, result.running) == ("failed", False)
    assert host.running_cells() == []


async def test_output_is_truncated_to_the_pragma_budget(
    host: CodeModeHost, fake: FakeTools
) -> None:
    source = '// @exec: {"max_output_tokens": 2}\ntext("abcdefgh"); text("ijklmnop")'
    result = await host.exec("call-1", source, fake, TOOLS)
    assert texts(result) == [
        "Warning: truncated output (original token count: 5)\nTotal output lines: 2\n\n"
        "abcd…3 tokens truncated…mnop"
    ]


# ---- runaway scripts (real CPU time) ---------------------------------------------


async def test_runaway_loop_is_terminated_and_the_host_stays_usable(
    nursery: trio.Nursery, fake: FakeTools
) -> None:
    host = CodeModeHost(nursery, step_time_limit=0.2)
    result = await host.exec("call-1", 'text("start"); while (true) {}', fake, TOOLS)
    assert result.status == "terminated"
    assert header(result).startswith("Script terminated\nWall time ")
    assert texts(result) == [
        "start",
        "Script exceeded the CPU time limit of 0.2 seconds per step (runaway loop?) "
        "and was terminated.",
    ]
    again = await host.exec("call-2", 'text("still works")', fake, TOOLS)
    assert (again.status, texts(again), again.cell_id) == ("completed", ["still works"], 2)
    await host.aclose()


async def test_runaway_loop_after_an_await_is_terminated(nursery: trio.Nursery) -> None:
    tools = FakeTools(delay=0)
    host = CodeModeHost(nursery, step_time_limit=0.2)
    result = await host.exec("call-1", "await tools.slow({}); while (true) {}", tools, TOOLS)
    assert result.status == "terminated"
    assert [call[0] for call in tools.calls] == ["slow"]
    again = await host.exec("call-2", "text(await tools.slow({n: 2}))", tools, TOOLS)
    assert texts(again) == ['{"tool":"slow","args":{"n":2}}']
    await host.aclose()


async def test_memory_limit_fails_the_script(nursery: trio.Nursery, fake: FakeTools) -> None:
    host = CodeModeHost(nursery, memory_limit=16 << 20)
    source = "const chunks = []; while (true) chunks.push(new Array(100000).fill(1));"
    result = await host.exec("call-1", source, fake, TOOLS)
    assert result.status == "failed"
    assert texts(result)[0].startswith("Script error:\nInternalError: out of memory")
    again = await host.exec("call-2", "text(1)", fake, TOOLS)
    assert texts(again) == ["1"]
    await host.aclose()


async def test_stack_overflow_fails_the_script(host: CodeModeHost, fake: FakeTools) -> None:
    result = await host.exec("call-1", "function f() { return f() + 1 }\nf()", fake, TOOLS)
    assert result.status == "failed"
    assert texts(result)[0].startswith("Script error:\nRangeError: Maximum call stack size")


async def test_endless_microtask_chain_does_not_block_trio(
    host: CodeModeHost, fake: FakeTools
) -> None:
    source = '// @exec: {"yield_time_ms": 50}\ntext("spinning"); while (true) await null;'
    result = await host.exec("call-1", source, fake, TOOLS)
    assert (result.status, texts(result)) == ("running", ["spinning"])
    stopped = await host.wait(result.cell_id, terminate=True)
    assert stopped.status == "terminated"
    assert stopped.output == (
        f"Script terminated\nWall time {header(stopped).split()[4]} seconds\nOutput:\n"
    )


# ---- nested tools ----------------------------------------------------------------


async def test_promise_all_runs_nested_calls_concurrently(
    host: CodeModeHost, fake: FakeTools, autojump_clock: trio.testing.MockClock
) -> None:
    source = (
        "const results = await Promise.all([tools.slow({i: 1}), tools.slow({i: 2}), "
        "tools.slow({i: 3})]);\ntext(results.map((r) => r.args.i))"
    )
    result = await host.exec("call-7", source, fake, TOOLS)
    assert fake.max_in_flight == 3
    # Ids follow the script's call order (the tasks themselves start in any order).
    assert sorted((call_id, args) for _, args, call_id in fake.calls) == [
        ("call-7/code-1", {"i": 1}),
        ("call-7/code-2", {"i": 2}),
        ("call-7/code-3", {"i": 3}),
    ]
    assert header(result) == "Script completed\nWall time 1.0 seconds\nOutput:\n"
    assert texts(result) == ["[1,2,3]"]


async def test_tool_call_error_rejects_with_an_error(
    host: CodeModeHost, fake: FakeTools, autojump_clock: trio.testing.MockClock
) -> None:
    source = (
        "try { await tools.fail({}) } catch (e) { text(e instanceof Error); text(e.message) }\n"
        "await tools.fail({})"
    )
    result = await host.exec("call-1", source, fake, TOOLS)
    assert result.status == "failed"
    assert texts(result) == ["true", "the tool failed", "Script error:\nError: the tool failed"]


async def test_tool_arguments_by_kind(
    host: CodeModeHost, fake: FakeTools, autojump_clock: trio.testing.MockClock
) -> None:
    source = (
        "await tools.slow();\n"
        'await tools.apply_patch("*** Begin Patch");\n'
        "try { await tools.apply_patch({}) } catch (e) { text(e.message) }\n"
        'try { await tools.slow("x") } catch (e) { text(e.message) }\n'
        "await tools.mcp__files__read_file({path: 'a'});\n"
        "text(ALL_TOOLS.map((t) => t.name).join(','));\n"
        "text(Object.isFrozen(ALL_TOOLS) && Object.isFrozen(ALL_TOOLS[0]))"
    )
    result = await host.exec("call-1", source, fake, TOOLS)
    assert fake.calls == [
        ("slow", {}, "call-1/code-1"),
        ("apply_patch", "*** Begin Patch", "call-1/code-2"),
        ("mcp__files__read-file", {"path": "a"}, "call-1/code-3"),
    ]
    assert texts(result) == [
        "tools.apply_patch is a freeform tool and expects a string argument",
        "tools.slow expects an object argument",
        "slow,forever,fail,apply_patch,exec_command,mcp__files__read_file",
        "true",
    ]


async def test_undeclared_tools_reach_the_caller(host: CodeModeHost) -> None:
    async def call_tool(name: str, args: object, call_id: str) -> object:
        await trio.lowlevel.checkpoint()
        raise ToolCallError(f"unsupported nested tool call: {name}")

    result = await host.exec("call-1", "await tools.nope(1)", call_tool, [])
    assert texts(result) == ["Script error:\nError: unsupported nested tool call: nope"]


async def test_non_json_tool_results_reject(host: CodeModeHost) -> None:
    async def call_tool(name: str, args: object, call_id: str) -> object:
        await trio.lowlevel.checkpoint()
        return {"bad": float("nan")}

    result = await host.exec("call-1", "await tools.x({})", call_tool, [])
    assert texts(result)[0].startswith("Script error:\nError: tool x returned a value that is not")


# ---- yields, wait and cell ids ---------------------------------------------------


async def test_yield_control_then_wait(
    host: CodeModeHost, fake: FakeTools, autojump_clock: trio.testing.MockClock
) -> None:
    source = 'text("before"); yield_control(); const r = await tools.slow({}); text("after")'
    first = await host.exec("call-exec", source, fake, TOOLS)
    assert first.output == [
        {"type": "input_text", "text": "Script running with cell ID 1\nWall time 0.0 seconds\nOutput:\n"},
        {"type": "input_text", "text": "before"},
    ]
    assert (first.status, first.running, first.cell_id) == ("running", True, 1)
    assert host.running_cells() == [1]
    final = await host.wait(1)
    assert final.output == [
        {"type": "input_text", "text": "Script completed\nWall time 1.0 seconds\nOutput:\n"},
        {"type": "input_text", "text": "after"},
    ]
    assert (final.status, final.running, final.cell_id) == ("completed", False, 1)
    assert fake.calls == [("slow", {}, "call-exec/code-1")]
    assert host.running_cells() == []
    gone = await host.wait(1)
    assert gone.output == "Script failed\nWall time 0.0 seconds\nOutput:\nNo running cell with ID 1"
    assert (gone.status, gone.running) == ("failed", False)


async def test_yield_deadline_from_pragma(
    host: CodeModeHost, fake: FakeTools, autojump_clock: trio.testing.MockClock
) -> None:
    fake.delay = 2.0
    source = '// @exec: {"yield_time_ms": 500}\ntext("a"); await tools.slow({}); text("b")'
    first = await host.exec("call-1", source, fake, TOOLS)
    assert header(first) == "Script running with cell ID 1\nWall time 0.5 seconds\nOutput:\n"
    assert texts(first) == ["a"]
    middle = await host.wait(1, yield_time_ms=1000)
    assert middle.output == "Script running with cell ID 1\nWall time 1.0 seconds\nOutput:\n"
    assert middle.running
    final = await host.wait(1)
    assert header(final) == "Script completed\nWall time 0.5 seconds\nOutput:\n"
    assert texts(final) == ["b"]


async def test_default_yield_is_ten_seconds_plus_grace(
    host: CodeModeHost, fake: FakeTools, autojump_clock: trio.testing.MockClock
) -> None:
    first = await host.exec("call-1", "await tools.forever({})", fake, TOOLS)
    assert first.output == "Script running with cell ID 1\nWall time 11.0 seconds\nOutput:\n"
    stopped = await host.wait(1, terminate=True)
    assert stopped.output == "Script terminated\nWall time 0.0 seconds\nOutput:\n"
    assert (stopped.status, stopped.running) == ("terminated", False)
    assert fake.cancelled == ["call-1/code-1"]


async def test_nested_shell_call_extends_the_default_deadline(
    nursery: trio.Nursery, fake: FakeTools, autojump_clock: trio.testing.MockClock
) -> None:
    host = CodeModeHost(nursery, default_yield_ms=1000)
    source = "const r = await tools.exec_command({cmd: 'x', yield_time_ms: 3000, seconds: 2});"
    result = await host.exec("call-1", source + "text(r.tool)", fake, TOOLS)
    assert header(result) == "Script completed\nWall time 2.0 seconds\nOutput:\n"
    explicit = '// @exec: {"yield_time_ms": 1000}\n' + source
    yielded = await host.exec("call-2", explicit, fake, TOOLS)
    assert header(yielded) == "Script running with cell ID 2\nWall time 1.0 seconds\nOutput:\n"
    await host.aclose()


async def test_cell_ids_increment_and_are_never_reused(
    host: CodeModeHost, fake: FakeTools, autojump_clock: trio.testing.MockClock
) -> None:
    ids = []
    for source in ["text(1)", "// @exec: {}", "yield_control(); await tools.slow({})", "x.y"]:
        ids.append((await host.exec("call", source, fake, TOOLS)).cell_id)
    assert ids == [1, 2, 3, 4]
    assert host.running_cells() == [3]
    assert (await host.wait(3)).status == "completed"
    assert (await host.exec("call", "text(1)", fake, TOOLS)).cell_id == 5


async def test_wait_cancelled_after_a_yield_keeps_the_cell_and_its_output(
    host: CodeModeHost, fake: FakeTools, autojump_clock: trio.testing.MockClock
) -> None:
    fake.delay = 2.0
    source = 'yield_control(); await tools.slow({}); text("late"); await tools.slow({}); text("end")'
    first = await host.exec("call-1", source, fake, TOOLS)
    assert first.running
    with trio.move_on_after(3.0):
        await host.wait(1, yield_time_ms=100_000)  # "late" arrives at 2 s, then cancelled
    assert host.running_cells() == [1]
    final = await host.wait(1)
    assert (final.status, texts(final)) == ("completed", ["late", "end"])


async def test_only_one_observer_per_cell(
    host: CodeModeHost, fake: FakeTools, autojump_clock: trio.testing.MockClock
) -> None:
    first = await host.exec("call-1", "yield_control(); await tools.slow({})", fake, TOOLS)
    results: list[ExecOutput] = []

    async def observe() -> None:
        results.append(await host.wait(first.cell_id))

    async with trio.open_nursery() as observers:
        observers.start_soon(observe)
        await trio.testing.wait_all_tasks_blocked()
        busy = await host.wait(first.cell_id)
    assert busy.output == (
        "Script failed\nWall time 0.0 seconds\nOutput:\nexec cell 1 already has an active observer"
    )
    assert [result.status for result in results] == ["completed"]


# ---- globals ---------------------------------------------------------------------


async def test_notify_collects_compact_json(host: CodeModeHost, fake: FakeTools) -> None:
    source = 'notify({phase: "working", n: [1, 2]}); notify("plain text"); text("done")'
    result = await host.exec("call-1", source, fake, TOOLS)
    assert result.notifications == ('{"phase":"working","n":[1,2]}', "plain text")
    assert texts(result) == ["done"]
    empty = await host.exec("call-2", 'notify("  ")', fake, TOOLS)
    assert texts(empty)[0].startswith("Script error:\nTypeError: notify expects non-empty text")


async def test_notifications_after_a_yield_go_to_wait(
    host: CodeModeHost, fake: FakeTools, autojump_clock: trio.testing.MockClock
) -> None:
    source = 'notify("one"); yield_control(); await tools.slow({}); notify("two")'
    first = await host.exec("call-1", source, fake, TOOLS)
    assert first.notifications == ("one",)
    assert (await host.wait(1)).notifications == ("two",)


async def test_image_rules(host: CodeModeHost, fake: FakeTools) -> None:
    source = (
        f'image("{PNG}");\n'
        f'image("{PNG}", "original");\n'
        f'image({{image_url: "{PNG}", detail: "low"}});\n'
        'image("https://example.com/cat.png");\n'
    )
    result = await host.exec("call-1", source, fake, TOOLS)
    assert isinstance(result.output, list)
    # On the wire a tool output's image has no detail (nanocodex, "Responses Lite"): the
    # detail only picked the size limits (a 1x1 PNG fits both, byte for byte); "low" is a note.
    assert result.output[1:] == [
        {"type": "input_image", "image_url": PNG},
        {"type": "input_image", "image_url": PNG},
        {"type": "input_text", "text": LOW_DETAIL_NOTE},
        {
            "type": "input_text",
            "text": "image content omitted because remote image URLs are not supported",
        },
    ]
    bad_detail = await host.exec("call-2", f'image("{PNG}", "huge")', fake, TOOLS)
    assert texts(bad_detail)[0].startswith(
        "Script error:\nTypeError: image detail must be one of: auto, low, high, original"
    )
    bad_url = await host.exec("call-3", 'image("file:///etc/passwd")', fake, TOOLS)
    assert bad_url.status == "failed"


async def test_store_and_load_persist_across_cells(host: CodeModeHost, fake: FakeTools) -> None:
    first = await host.exec("call-1", 'store("k", {a: [1]}); text(load("k").a[0])', fake, TOOLS)
    assert texts(first) == ["1"]
    failed = await host.exec("call-2", 'store("f", true); throw new Error("x")', fake, TOOLS)
    assert failed.status == "failed"
    later = await host.exec(
        "call-3", 'text(load("k")); text(load("f")); text(typeof load("nope"))', fake, TOOLS
    )
    assert texts(later) == ['{"a":[1]}', "true", "undefined"]
    bad = await host.exec("call-4", 'store("g", () => 1)', fake, TOOLS)
    assert bad.status == "failed"


async def test_exit_ends_the_script_successfully(host: CodeModeHost, fake: FakeTools) -> None:
    result = await host.exec("call-1", "text(1); await null; exit(); text(2)", fake, TOOLS)
    assert (result.status, texts(result)) == ("completed", ["1"])


async def test_set_timeout_runs_on_the_trio_clock(
    host: CodeModeHost, fake: FakeTools, autojump_clock: trio.testing.MockClock
) -> None:
    source = (
        'setTimeout(() => text("t2"), 200);\n'
        'setTimeout((x) => text(x), 100, "t1");\n'
        'const cancelled = setTimeout(() => text("never"), 50);\n'
        "clearTimeout(cancelled);\n"
        "await new Promise((resolve) => setTimeout(resolve, 300));\n"
        'text("done")'
    )
    result = await host.exec("call-1", source, fake, TOOLS)
    assert header(result) == "Script completed\nWall time 0.3 seconds\nOutput:\n"
    assert texts(result) == ["t1", "t2", "done"]


async def test_pending_timers_do_not_keep_the_cell_alive(
    host: CodeModeHost, fake: FakeTools, autojump_clock: trio.testing.MockClock
) -> None:
    result = await host.exec("call-1", 'setTimeout(() => text("late"), 5000); text("now")', fake, TOOLS)
    assert header(result) == "Script completed\nWall time 0.0 seconds\nOutput:\n"
    assert texts(result) == ["now"]


async def test_timer_callback_errors_fail_the_cell(
    host: CodeModeHost, fake: FakeTools, autojump_clock: trio.testing.MockClock
) -> None:
    source = 'setTimeout(() => { throw new Error("in timer") }, 10); await tools.forever({})'
    result = await host.exec("call-1", source, fake, TOOLS)
    assert result.status == "failed"
    assert texts(result)[0].startswith("Script error:\nError: in timer")
    assert fake.cancelled == ["call-1/code-1"]  # the pending call is discarded


# ---- cancellation ----------------------------------------------------------------


async def test_aclose_cancels_running_cells(
    nursery: trio.Nursery, fake: FakeTools, autojump_clock: trio.testing.MockClock
) -> None:
    host = CodeModeHost(nursery)
    first = await host.exec("call-1", 'text("a"); yield_control(); await tools.forever({})', fake, TOOLS)
    assert first.running
    await trio.testing.wait_all_tasks_blocked()
    assert [call[0] for call in fake.calls] == ["forever"]
    await host.aclose()
    assert fake.cancelled == ["call-1/code-1"]
    assert host.running_cells() == []
    await host.aclose()  # idempotent
    with pytest.raises(trio.ClosedResourceError):
        await host.exec("call-2", "text(1)", fake, TOOLS)
    with pytest.raises(trio.ClosedResourceError):
        await host.wait(1)


async def test_cancelled_exec_terminates_a_cell_that_never_yielded(
    host: CodeModeHost, fake: FakeTools, autojump_clock: trio.testing.MockClock
) -> None:
    with trio.move_on_after(1.0):
        await host.exec("call-1", "await tools.forever({})", fake, TOOLS)
    await trio.testing.wait_all_tasks_blocked()
    assert fake.cancelled == ["call-1/code-1"]
    assert host.running_cells() == []
    gone = await host.wait(1)
    assert gone.status == "failed"


async def test_cancelling_the_agent_nursery_ends_every_cell(
    fake: FakeTools, autojump_clock: trio.testing.MockClock
) -> None:
    async with trio.open_nursery() as agent:
        host = CodeModeHost(agent)
        first = await host.exec("call-1", "yield_control(); await tools.forever({})", fake, TOOLS)
        second = await host.exec("call-2", "yield_control(); await tools.forever({})", fake, TOOLS)
        assert first.running and second.running
        await trio.testing.wait_all_tasks_blocked()
        agent.cancel_scope.cancel()
    assert sorted(fake.cancelled) == ["call-1/code-1", "call-2/code-1"]
    assert host.running_cells() == []


async def test_unexpected_tool_exceptions_are_bugs_and_propagate(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async def broken(name: str, args: object, call_id: str) -> object:
        await trio.lowlevel.checkpoint()
        raise RuntimeError("tool bug")

    with pytest.RaisesGroup(RuntimeError, flatten_subgroups=True):
        async with trio.open_nursery() as agent:
            host = CodeModeHost(agent)
            await host.exec("call-1", "await tools.x({})", broken, [])
