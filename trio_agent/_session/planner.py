"""The turn planner: what a turn does after a response completes (pure).

    sample -> (tool calls?) run tools -> sample -> ... -> final answer

- tool calls in the response: run them (in output order), then sample again with
  their outputs;
- no tool call and ``end_turn: false``: sample again with an empty input
  (``explicit_end_turn_false_continues_without_a_tool_call``);
- no tool call but steers pending: sample again so the steers join
  (SPEC sec. 4), even after a final answer;
- otherwise the turn ends with the last assistant message (empty when there is none).
There is no model-call limit (``continues_past_previous_model_call_limit``).
"""

from __future__ import annotations

from typing import Any

from .._record import Record

__all__ = ["FinishTurn", "RunTools", "SampleAgain", "Step", "plan_next"]


class RunTools(Record):
    __slots__ = ("calls",)
    __match_args__ = ("calls",)

    def __init__(self, calls: tuple[dict[str, Any], ...]) -> None:
        self.calls = calls


class SampleAgain(Record):
    __slots__ = ("reason",)
    __match_args__ = ("reason",)

    def __init__(self, reason: str) -> None:
        self.reason = reason  # "end_turn_false" | "steers"


class FinishTurn(Record):
    __slots__ = ("message",)
    __match_args__ = ("message",)

    def __init__(self, message: str) -> None:
        self.message = message


Step = RunTools | SampleAgain | FinishTurn


def plan_next(
    *,
    tool_calls: tuple[dict[str, Any], ...],
    end_turn: bool | None,
    final_message: str | None,
    pending_steers: int,
) -> Step:
    if tool_calls:
        return RunTools(tool_calls)
    if end_turn is False:
        return SampleAgain("end_turn_false")
    if pending_steers:
        return SampleAgain("steers")
    # A completed response with neither a message nor a tool call ends the turn with an
    # empty final message, as codex does (codex_pending_input seeds end turns so); no
    # nanocodex seed asserts the MalformedResponse its reference raises here.
    return FinishTurn(final_message if final_message is not None else "")
