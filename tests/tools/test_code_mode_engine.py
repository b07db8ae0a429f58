"""Synchronous tests of the QuickJS engine bridge (no Trio)."""

from __future__ import annotations

import pytest

from trio_agent._tools.code_mode._engine import (
    ContentOutput,
    EngineInterrupted,
    EngineLimits,
    HostRequest,
    NotifyOutput,
    Outcome,
    QuickJsEngine,
    ToolSpec,
    YieldOutput,
    js_identifier,
)

TOOLS = [ToolSpec.from_tuple(("lookup", "Look things up", True))]


def _started(source: str, *, stored: dict[str, object] | None = None) -> QuickJsEngine:
    engine = QuickJsEngine(EngineLimits(step_time_limit=0.25))
    engine.start(source, TOOLS, stored or {})
    engine.run_jobs(100)
    return engine


def test_host_requests_round_trip_through_the_outbox() -> None:
    engine = _started('text("a"); const r = await tools.lookup({q: 1}); text(r.answer)')
    assert engine.take_outputs() == [ContentOutput({"type": "input_text", "text": "a"})]
    assert engine.drain_outbox() == [
        HostRequest(1, "tool", {"name": "lookup", "input": {"q": 1}})
    ]
    assert engine.drain_outbox() == []
    assert engine.outcome() is None
    engine.resolve(1, {"answer": 42})
    assert engine.run_jobs(100) is False
    assert engine.take_outputs() == [ContentOutput({"type": "input_text", "text": "42"})]
    assert engine.outcome() == Outcome("completed", None, {})


def test_reject_settles_with_an_error_without_internal_frames() -> None:
    engine = _started("await tools.lookup({})")
    (request,) = engine.drain_outbox()
    engine.reject(request.id, "lookup failed")
    engine.run_jobs(100)
    assert engine.outcome() == Outcome("failed", "Error: lookup failed", {})


def test_output_events_keep_script_order() -> None:
    engine = _started('text(1); notify("n"); yield_control(); text({a: 2})')
    assert engine.take_outputs() == [
        ContentOutput({"type": "input_text", "text": "1"}),
        NotifyOutput("n"),
        YieldOutput(),
        ContentOutput({"type": "input_text", "text": '{"a":2}'}),
    ]


def test_long_concatenated_strings_cross_the_binding() -> None:
    # QuickJS rope strings cannot be returned to Python directly; everything
    # crosses as JSON text.
    engine = _started('text("a".repeat(5000) + "b" + "c".repeat(5000))')
    (event,) = engine.take_outputs()
    assert event == ContentOutput({"type": "input_text", "text": "a" * 5000 + "b" + "c" * 5000})


def test_store_writes_are_reported_with_the_outcome() -> None:
    engine = _started('text(load("old")); store("new", [1, {"x": null}])', stored={"old": "v"})
    assert engine.take_outputs() == [ContentOutput({"type": "input_text", "text": "v"})]
    assert engine.outcome() == Outcome("completed", None, {"new": [1, {"x": None}]})


def test_runaway_start_step_is_interrupted() -> None:
    engine = QuickJsEngine(EngineLimits(step_time_limit=0.1))
    with pytest.raises(EngineInterrupted, match="interrupted"):
        engine.start("while (true) {}", [], {})


def test_runaway_promise_job_is_interrupted() -> None:
    engine = _started("await tools.lookup({}); while (true) {}")
    (request,) = engine.drain_outbox()
    engine.resolve(request.id, None)
    with pytest.raises(EngineInterrupted):
        engine.run_jobs(100)


def test_endless_microtasks_are_sliced() -> None:
    engine = _started("while (true) await null")
    assert engine.run_jobs(10) is True
    assert engine.outcome() is None


def test_timers_are_host_requests_and_clear_cancels_them() -> None:
    engine = _started("const t = setTimeout(() => text(1), 250); clearTimeout(t)")
    assert engine.drain_outbox() == [HostRequest(1, "sleep", 250), HostRequest(1, "cancel", None)]


def test_js_identifier() -> None:
    assert js_identifier("mcp__server__do-thing.v2") == "mcp__server__do_thing_v2"
    assert js_identifier("$ok_1") == "$ok_1"
    assert js_identifier("naïve") == "na_ve"


@pytest.mark.parametrize(
    ("source", "error"),
    [
        ("throw new Error()", "Error\n    at <anonymous> (<input>:1:"),
        ("throw {a: 1}", '{"a":1}'),
        ('throw "plain"', "plain"),
        (
            'class E extends Error { constructor(m) { super(m); this.name = "E" } }\nthrow new E("x")',
            "E: x\n    at E (<input>:1:",
        ),
    ],
)
def test_error_texts(source: str, error: str) -> None:
    outcome = _started(source).outcome()
    assert outcome is not None
    assert outcome.status == "failed"
    assert str(outcome.error).startswith(error)
