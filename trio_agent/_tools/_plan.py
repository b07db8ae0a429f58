"""``update_plan {explanation?, plan: [{step, status}]}``: the model's task plan.

The runtime keeps no state for it: each call replaces the plan, is reported as a
``plan.updated`` event (``{call_id, explanation, plan}``) for the application to
show, and answers ``"Plan updated"`` (nanocodex 5.3).
"""

from __future__ import annotations

from typing import Annotated, Literal, NotRequired, TypedDict

from ._nested_parameters import PLAN_DESCRIPTION
from ._schema import Shape
from ._tool_errors import InvalidToolArguments, NestedToolError

__all__ = ["PLAN_DESCRIPTION", "PLAN_UPDATED", "plan_schema", "update_plan_arguments"]

PLAN_UPDATED = "Plan updated"


class PlanStep(TypedDict):
    step: Annotated[str, "What to do, in a few words."]
    status: Literal["pending", "in_progress", "completed"]


class PlanUpdate(TypedDict):
    explanation: NotRequired[Annotated[str, "Why the plan changed, if it did."]]
    plan: Annotated[list[PlanStep], "Every step, in order."]


_shape: Shape | None = None


def _plan_shape() -> Shape:
    global _shape
    if _shape is None:
        _shape = Shape(PlanUpdate, "tool 'update_plan'")
    return _shape


def plan_schema() -> dict[str, object]:
    return _plan_shape().schema


def update_plan_arguments(arguments: object) -> tuple[str | None, list[dict[str, str]]]:
    """``(explanation, plan)`` from the call's arguments, or ``NestedToolError``."""
    try:
        update = _plan_shape().validate(arguments)
    except InvalidToolArguments as exc:
        raise NestedToolError(f"invalid arguments for update_plan: {exc}") from None
    assert isinstance(update, dict)
    return update.get("explanation"), [dict(step) for step in update["plan"]]
