"""GenAI and OpenInference attributes: what backends render natively, beside chronicle's own keys.

``llm`` boundaries carry the OpenTelemetry GenAI conventions where known: the operation and
provider (fixed when decorating), the request parameters found among the arguments (``model``,
``temperature``, ``top_p``, ``max_tokens``, ``seed``) and, from the result, the response model, id
and token usage (``input_tokens``/``prompt_tokens``, ``output_tokens``/``completion_tokens``), read
from a mapping or an object's attributes. With OpenInference on, every boundary also carries its
OpenInference span kind and the input/output values Phoenix shows.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from types import MappingProxyType
from typing import Any, Final

from .. import semconv
from ..redact import Redactor
from .session_attrs import AttributeValue

GENAI_OPERATION: Final = "chat"
"""The ``gen_ai.operation.name`` of ``llm`` boundaries."""

GENAI_REQUEST_PARAMETERS: Final[Mapping[str, str]] = MappingProxyType(
    {
        "model": semconv.GEN_AI_REQUEST_MODEL,
        "temperature": semconv.GEN_AI_REQUEST_TEMPERATURE,
        "top_p": semconv.GEN_AI_REQUEST_TOP_P,
        "max_tokens": semconv.GEN_AI_REQUEST_MAX_TOKENS,
        "max_completion_tokens": semconv.GEN_AI_REQUEST_MAX_TOKENS,
        "max_output_tokens": semconv.GEN_AI_REQUEST_MAX_TOKENS,
        "seed": semconv.GEN_AI_REQUEST_SEED,
    }
)
"""Parameter name -> the GenAI request attribute its argument is recorded as."""

_USAGE: Final = (
    (semconv.GEN_AI_USAGE_INPUT_TOKENS, ("input_tokens", "prompt_tokens")),
    (semconv.GEN_AI_USAGE_OUTPUT_TOKENS, ("output_tokens", "completion_tokens")),
)

OPENINFERENCE_SPAN_KINDS: Final[Mapping[str, str]] = MappingProxyType(
    {
        "llm": "LLM",
        "tool": "TOOL",
        "retrieval": "RETRIEVER",
        "guardrail": "GUARDRAIL",
        "agent": "AGENT",
        "memory": "CHAIN",
        "custom": "CHAIN",
    }
)
"""Boundary kind -> ``openinference.span.kind``."""

_JSON: Final = "application/json"


def attribute_scalar(value: Any) -> AttributeValue | None:
    """``value`` when it can be a span attribute as it is (str, bool, float, 64-bit int), else None."""
    if isinstance(value, (str, bool, float)):
        return value
    if isinstance(value, int) and -(2**63) <= value < 2**63:
        return value
    return None


def static_attributes(provider: str | None) -> dict[str, AttributeValue]:
    """The GenAI attributes every call of an ``llm`` boundary carries."""
    attrs: dict[str, AttributeValue] = {semconv.GEN_AI_OPERATION_NAME: GENAI_OPERATION}
    if provider:
        attrs[semconv.GEN_AI_PROVIDER_NAME] = provider
    return attrs


def request_parameters(parameters: Iterable[str]) -> dict[str, str]:
    """Of a function's parameter names, those recorded as GenAI request attributes (name -> attribute key)."""
    names = set(parameters)
    return {p: key for p, key in GENAI_REQUEST_PARAMETERS.items() if p in names}


def request_attributes(
    bound: Mapping[str, Any], parameters: Mapping[str, str], redactor: Redactor | None = None
) -> dict[str, AttributeValue]:
    """The GenAI request attributes of one call's bound arguments (``parameters`` from :func:`request_parameters`);
    strings go through ``redactor`` (a model name may be a URL with a password)."""
    out: dict[str, AttributeValue] = {}
    for param, key in parameters.items():
        value = attribute_scalar(bound.get(param))
        if value is not None:
            out[key] = redactor.redact_text(value) if redactor is not None and isinstance(value, str) else value
    return out


def field_of(obj: Any, name: str) -> Any:
    """``obj[name]`` for a mapping, else the attribute ``name`` (None when absent)."""
    if type(obj) is dict or isinstance(obj, Mapping):
        return obj.get(name)
    return getattr(obj, name, None)


def finish_reasons(result: Any) -> tuple[str, ...]:
    """Why the model stopped: ``choices[].finish_reason`` (OpenAI chat) or ``stop_reason`` (Anthropic)."""
    choices = field_of(result, "choices")
    if isinstance(choices, (list, tuple)):
        reasons = []
        for choice in choices[:64]:
            reason = choice.get("finish_reason") if type(choice) is dict else field_of(choice, "finish_reason")
            if isinstance(reason, str):
                reasons.append(reason)
        return tuple(reasons)
    for name in ("stop_reason", "finish_reason"):  # Anthropic; pydantic-ai's ModelResponse
        reason = field_of(result, name)
        if isinstance(reason, str):
            return (reason,)
    return ()


def response_attributes(result: Any, redactor: Redactor | None = None) -> dict[str, Any]:
    """The GenAI response attributes (model, id, finish reasons, token usage) found in an ``llm`` boundary's
    result; strings go through ``redactor``."""
    out: dict[str, Any] = {}
    model = field_of(result, "model")
    if not isinstance(model, str):
        model = field_of(result, "model_name")  # pydantic-ai's ModelResponse
    if isinstance(model, str):
        out[semconv.GEN_AI_RESPONSE_MODEL] = redactor.redact_text(model) if redactor is not None else model
    rid = field_of(result, "id")
    for name in ("response_id", "provider_response_id"):  # the Agents SDK's and pydantic-ai's ModelResponse
        if isinstance(rid, str):
            break
        rid = field_of(result, name)
    if isinstance(rid, str):
        out[semconv.GEN_AI_RESPONSE_ID] = redactor.redact_text(rid) if redactor is not None else rid
    out.update(outcome_attributes(finish_reasons(result), field_of(result, "usage")))
    return out


def outcome_attributes(reasons: tuple[str, ...], usage: Any) -> dict[str, Any]:
    """``gen_ai.response.finish_reasons`` (when there are any) and the token counts of ``usage`` (when given)."""
    out: dict[str, Any] = {}
    if reasons:
        out[semconv.GEN_AI_RESPONSE_FINISH_REASONS] = reasons
    if usage is not None:
        out.update(usage_attributes(usage))
    return out


def usage_attributes(usage: Any) -> dict[str, int]:
    """The GenAI token counts of a ``usage`` mapping or object (``input_tokens``/``prompt_tokens``…)."""
    out: dict[str, int] = {}
    for key, names in _USAGE:
        for n in names:
            value = field_of(usage, n)
            if isinstance(value, int) and not isinstance(value, bool):
                out[key] = value
                break
    return out


def add_openinference_io(attrs: dict[str, AttributeValue]) -> None:
    """Copy the recorded input and output (or error) of a call to the OpenInference value attributes."""
    if semconv.INPUT in attrs:
        attrs[semconv.OPENINFERENCE_INPUT_VALUE] = attrs[semconv.INPUT]
        attrs[semconv.OPENINFERENCE_INPUT_MIME_TYPE] = _JSON
    output = attrs.get(semconv.ERROR, attrs.get(semconv.OUTPUT))
    if output is not None:
        attrs[semconv.OPENINFERENCE_OUTPUT_VALUE] = output
        attrs[semconv.OPENINFERENCE_OUTPUT_MIME_TYPE] = _JSON
