"""plan_next: what a turn does after a completed response."""

from __future__ import annotations

from typing import Any

import pytest

from trio_agent._session.planner import FinishTurn, RunTools, SampleAgain, Step, plan_next

CALL = {"type": "custom_tool_call", "call_id": "c1", "name": "exec", "input": "1"}
FUNC = {"type": "function_call", "call_id": "c2", "name": "wait", "arguments": "{}"}


@pytest.mark.parametrize(
    ("tool_calls", "end_turn", "final_message", "pending_steers", "expected"),
    [
        # tool calls always run first, in output order
        ((CALL,), None, None, 0, RunTools((CALL,))),
        ((CALL, FUNC), True, "done", 3, RunTools((CALL, FUNC))),
        ((FUNC, CALL), False, None, 0, RunTools((FUNC, CALL))),
        # end_turn false without tool calls: sample again with an empty input
        ((), False, "partial", 0, SampleAgain("end_turn_false")),
        ((), False, None, 0, SampleAgain("end_turn_false")),
        ((), False, "partial", 2, SampleAgain("end_turn_false")),
        # pending steers after a final answer join in a new sample
        ((), None, "final", 1, SampleAgain("steers")),
        ((), True, "final", 8, SampleAgain("steers")),
        ((), None, None, 1, SampleAgain("steers")),
        # otherwise the turn ends with the final message
        ((), None, "final", 0, FinishTurn("final")),
        ((), True, "final", 0, FinishTurn("final")),
        ((), True, "", 0, FinishTurn("")),
    ],
)
def test_plan_next(
    tool_calls: tuple[dict[str, Any], ...],
    end_turn: bool | None,
    final_message: str | None,
    pending_steers: int,
    expected: Step,
) -> None:
    step = plan_next(
        tool_calls=tool_calls, end_turn=end_turn, final_message=final_message, pending_steers=pending_steers
    )
    assert step == expected
    assert type(step) is type(expected)


@pytest.mark.parametrize("end_turn", [None, True])
def test_nothing_to_do_ends_the_turn_with_an_empty_answer(end_turn: bool | None) -> None:
    """An empty completion ends the turn (codex_pending_input seeds); the reference
    nanocodex raised MalformedResponse here, which no seed asserts."""
    assert plan_next(tool_calls=(), end_turn=end_turn, final_message=None, pending_steers=0) == FinishTurn("")
    assert plan_next(tool_calls=(), end_turn=end_turn, final_message=None, pending_steers=1) == SampleAgain("steers")
