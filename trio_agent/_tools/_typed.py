"""Typed user tools: a ``ToolSpec`` from a Python function.

``typed_spec(fn)`` reads ``fn``'s signature (annotations resolved with
``eval_str=True``) and docstring, builds the JSON schema of its parameters
(``_schema``) and returns a ``ToolSpec`` whose handler validates and converts the
model's arguments *before* calling ``fn``; bad arguments raise
``InvalidToolArguments`` naming every offending field (the dispatcher answers the
model with it as a failed result), so ``fn`` never sees a wrong type. A parameter
annotated ``ToolContext`` receives the call's context instead of an argument. A sync
function runs in a worker thread (``_threaded``: abandoned when the turn is cancelled).

``trio_agent`` imports this module (and ``_schema``) only when a typed tool is made.
"""

from __future__ import annotations

import copy
import inspect
import typing
from collections.abc import Callable
from typing import Any

from .._errors import ConfigError
from ._docstrings import parse_docstring
from ._schema import Builder, Field, ObjectNode, annotated_doc, raise_errors, to_json_value
from ._strict import lone_refs, strict_compatible
from ._threaded import is_async_callable, run_in_thread

__all__ = ["typed_spec"]


def _signature(fn: Callable[..., object], owner: str) -> inspect.Signature:
    if not callable(fn):
        raise ConfigError(f"{owner}: expected a function, got {type(fn).__name__}")
    try:
        return inspect.signature(fn, eval_str=True)
    except (NameError, TypeError, ValueError) as exc:
        raise ConfigError(
            f"{owner}: its signature cannot be read ({type(exc).__name__}: {exc}); define the types it uses at "
            "module level, where its annotations can be resolved"
        ) from None


def _parameters(
    signature: inspect.Signature, docs: dict[str, str], builder: Builder, owner: str, context_type: type,
    fills: dict[str, Callable[[], object]],
) -> tuple[list[Field], str | None]:
    """The argument fields, and the name of the parameter that takes the context;
    ``fills`` gets the defaults Python would not supply (a ``Field(...)`` default)."""
    fields: list[Field] = []
    context_param: str | None = None
    for param in signature.parameters.values():
        if param.annotation is context_type:
            context_param = param.name
            continue
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD, param.POSITIONAL_ONLY):
            raise ConfigError(
                f"{owner}: parameter {param.name!r} must be an ordinary named parameter (no *args, **kwargs or "
                "positional-only parameters): each argument is a named JSON field"
            )
        if param.annotation is param.empty:
            raise ConfigError(
                f"{owner}: parameter {param.name!r} has no type annotation; annotate it (or, for the call's "
                "context, annotate it as ta.ToolContext)"
            )
        annotation, default, fill = _field_default(param.annotation, param.default)
        if fill is not None:
            fills[param.name] = fill
        required = default is param.empty
        doc = docs.get(param.name) or annotated_doc(annotation)
        node = builder.node(annotation)
        fields.append(Field(param.name, node, required, doc, None if required else default))
    return fields, context_param


def _field_default(
    annotation: object, default: object
) -> tuple[object, object, Callable[[], object] | None]:
    """``x: int = pydantic.Field(5, ge=1)``: the annotation with the field's constraints
    (``Annotated[int, Field(...)]``), its plain default for the schema (``empty`` when
    it has none) and what makes the value of an omitted argument (Python would pass
    the ``FieldInfo`` itself)."""
    if type(default).__name__ != "FieldInfo" or not type(default).__module__.startswith("pydantic"):
        return annotation, default, None
    plain = getattr(default, "default", inspect.Parameter.empty)
    factory = getattr(default, "default_factory", None)
    if type(plain).__name__ != "PydanticUndefinedType":
        return typing.Annotated[annotation, default], plain, lambda: copy.deepcopy(plain)
    if callable(factory):  # optional; its value is made per call, so the schema shows none
        return typing.Annotated[annotation, default], None, factory
    return typing.Annotated[annotation, default], inspect.Parameter.empty, None


def typed_spec(fn: Callable[..., object], *, name: str | None = None, description: str | None = None) -> Any:
    """The ``ToolSpec`` of ``fn`` (see the module docstring); ``ConfigError`` when ``fn``
    cannot be described as a JSON tool."""
    from . import ToolSpec
    from ._context import ToolContext

    tool_name = str(name if name is not None else getattr(fn, "__name__", ""))
    owner = f"tool {tool_name!r}"
    signature = _signature(fn, owner)
    summary, docs = parse_docstring(inspect.getdoc(fn))
    text = description if description is not None else summary
    if not text:
        raise ConfigError(f"{owner}: it needs a description; give the function a docstring or pass description=")
    builder = Builder(owner)
    fills: dict[str, Callable[[], object]] = {}
    fields, context_param = _parameters(signature, docs, builder, owner, ToolContext, fills)
    params = ObjectNode(fields, dict, tool_name)
    parameters = typing.cast(dict[str, Any], lone_refs(builder.rooted(params.schema)))  # before the output's types
    output_schema: dict[str, Any] | None = None
    if signature.return_annotation is not signature.empty:
        try:
            output_schema = builder.node(signature.return_annotation).schema
        except ConfigError:
            output_schema = None  # an output we cannot describe is still returned as JSON
    if output_schema is not None:
        output_schema = builder.rooted(output_schema)

    is_async = is_async_callable(fn)

    async def handler(ctx: Any, arguments: object) -> object:
        errors: list[str] = []
        values = params.convert_fields(arguments, "", errors)
        if values is None:
            raise_errors(errors)
        for missing, fill in fills.items():
            if missing not in values:
                values[missing] = fill()
        if context_param is not None and is_async:
            values[context_param] = ctx
        if is_async:
            return to_json_value(await fn(**values))  # type: ignore[misc]
        return to_json_value(await run_in_thread(fn, values, ctx, context_param))

    return ToolSpec(
        name=tool_name, kind="function", description=text, handler=handler,
        parameters=parameters, output_schema=output_schema,
        strict=params.strict and strict_compatible(parameters),
    )
