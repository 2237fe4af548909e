"""Span attribute keys written by chronicle_otel: the contract with traces already in backends.

Every key chronicle writes is a constant here. A key is renamed only with a migration path
(the loader keeps reading the old name).
"""

from __future__ import annotations

from typing import Final, NamedTuple

__all__ = [
    "BOUNDARY_KIND",
    "BOUNDARY_NAME",
    "CALL_INDEX",
    "CODE_FUNCTION",
    "CODEC",
    "ERROR",
    "ERROR_HASH",
    "ERROR_KEYS",
    "ERROR_TRUNCATED",
    "GEN_AI_OPERATION_NAME",
    "METRIC_EXPORT_PATH",
    "METRIC_LOSS_CAUSE",
    "METRIC_SPANS_EXPORTED",
    "METRIC_SPANS_LOST",
    "METRIC_SPANS_QUEUED",
    "GEN_AI_PROVIDER_NAME",
    "GEN_AI_REQUEST_MAX_TOKENS",
    "GEN_AI_REQUEST_MODEL",
    "GEN_AI_REQUEST_SEED",
    "GEN_AI_REQUEST_TEMPERATURE",
    "GEN_AI_REQUEST_TOP_P",
    "GEN_AI_RESPONSE_FINISH_REASONS",
    "GEN_AI_RESPONSE_ID",
    "GEN_AI_RESPONSE_MODEL",
    "GEN_AI_USAGE_INPUT_TOKENS",
    "GEN_AI_USAGE_OUTPUT_TOKENS",
    "INPUT",
    "INPUT_HASH",
    "INPUT_KEYS",
    "INPUT_TRUNCATED",
    "OPENINFERENCE_INPUT_MIME_TYPE",
    "OPENINFERENCE_INPUT_VALUE",
    "OPENINFERENCE_OUTPUT_MIME_TYPE",
    "OPENINFERENCE_OUTPUT_VALUE",
    "OPENINFERENCE_SPAN_KIND",
    "OUTPUT",
    "OUTPUT_HASH",
    "OUTPUT_KEYS",
    "OUTPUT_TRUNCATED",
    "PAYLOAD_KEYS",
    "PayloadKeys",
    "REPLAY_MODE",
    "REPLAY_OF",
    "SESSION_PREFIX",
    "CHANGES",
    "STREAM",
    "STREAM_ITEMS",
    "UNREPLAYABLE",
    "STREAM_STATE",
]

BOUNDARY_NAME: Final = "chronicle.boundary.name"
"""Stable boundary name; by default ``module.qualname`` of the decorated function."""
BOUNDARY_KIND: Final = "chronicle.boundary.kind"
"""One of ``llm``, ``tool``, ``retrieval``, ``guardrail``, ``agent``, ``memory``, ``custom``."""
CALL_INDEX: Final = "chronicle.call.index"
"""Ordinal of this boundary name among the calls under the same parent boundary (0-based)."""

INPUT: Final = "chronicle.input"
"""Canonical JSON of the bound arguments ``{param: value}`` (``self``/``cls`` excluded); maybe a prefix."""
OUTPUT: Final = "chronicle.output"
"""Canonical JSON of the return value (for a stream: the list of yielded items); maybe a prefix."""
ERROR: Final = "chronicle.error"
"""Canonical JSON ``{"type", "message", "args", "exception"}`` when the call raised; maybe a prefix."""
INPUT_HASH: Final = "chronicle.input.hash"
"""``sha256:<hex>`` of the whole canonical input; also its address in the payload store."""
OUTPUT_HASH: Final = "chronicle.output.hash"
"""``sha256:<hex>`` of the whole canonical output."""
ERROR_HASH: Final = "chronicle.error.hash"
"""``sha256:<hex>`` of the whole canonical error."""
INPUT_TRUNCATED: Final = "chronicle.input.truncated"
"""True when :data:`INPUT` holds only a prefix; the payload store holds the whole."""
OUTPUT_TRUNCATED: Final = "chronicle.output.truncated"
"""True when :data:`OUTPUT` holds only a prefix."""
ERROR_TRUNCATED: Final = "chronicle.error.truncated"
"""True when :data:`ERROR` holds only a prefix."""


class PayloadKeys(NamedTuple):
    """The three attributes of one payload: its (capped) text, its hash and its truncation flag."""

    text: str
    hash: str
    truncated: str


INPUT_KEYS: Final = PayloadKeys(INPUT, INPUT_HASH, INPUT_TRUNCATED)
"""The attributes of the input payload."""
OUTPUT_KEYS: Final = PayloadKeys(OUTPUT, OUTPUT_HASH, OUTPUT_TRUNCATED)
"""The attributes of the output payload."""
ERROR_KEYS: Final = PayloadKeys(ERROR, ERROR_HASH, ERROR_TRUNCATED)
"""The attributes of the error payload."""
PAYLOAD_KEYS: Final = (INPUT_KEYS, OUTPUT_KEYS, ERROR_KEYS)
"""Every payload's attributes, in the order input, output, error."""

UNREPLAYABLE: Final = "chronicle.unreplayable"
"""The classes of values a payload of this call holds as ``unencodable`` placeholders (a replay cannot answer the
call from them); absent when every value was recorded typed."""

CHANGES: Final = "chronicle.changes"
"""The intended changes the call declared with :func:`chronicle_otel.changed` (a list of names): a replay of this
recording treats them as already there, not as differences."""

STREAM: Final = "chronicle.stream"
"""True when the output was streamed (generator or async generator)."""
STREAM_STATE: Final = "chronicle.stream.state"
"""How a stream ended: ``complete``, ``abandoned`` (closed early by the consumer) or ``error``."""
STREAM_ITEMS: Final = "chronicle.stream.items"
"""Number of items the stream yielded."""
CODEC: Final = "chronicle.codec"
"""Codec version of the payloads, e.g. ``chronicle-json/1``."""
SESSION_PREFIX: Final = "chronicle.session."
"""Prefix of session variables: ``chronicle.session.build_id``, ``chronicle.session.user_id``…"""
REPLAY_OF: Final = "chronicle.replay.of"
"""On spans emitted during a replay: the id of the original trace."""
REPLAY_MODE: Final = "chronicle.replay.mode"
"""On spans emitted during a replay: ``stub`` (answered from the recording) or ``live``."""

# Metrics chronicle reports through the OpenTelemetry metrics API (when the application set a MeterProvider).
METRIC_SPANS_EXPORTED: Final = "chronicle.spans.exported"
"""Counter: spans an export path delivered (attribute :data:`METRIC_EXPORT_PATH`)."""
METRIC_SPANS_LOST: Final = "chronicle.spans.lost"
"""Counter: spans an export path will not deliver, by :data:`METRIC_LOSS_CAUSE`."""
METRIC_SPANS_QUEUED: Final = "chronicle.spans.queued"
"""Up-down counter: spans waiting in an export queue now."""
METRIC_EXPORT_PATH: Final = "chronicle.export.path"
"""Metric attribute: ``store`` or ``otlp``."""
METRIC_LOSS_CAUSE: Final = "chronicle.loss.cause"
"""Metric attribute: ``queue_full``, ``export_failed``, ``undelivered``, ``no_boundary_window`` (the store's
holding area) or ``payload_buffer_full`` (a span stored without its whole payload)."""

# OpenTelemetry code attributes.
CODE_FUNCTION: Final = "code.function.name"
"""Fully qualified name (``module.qualname``) of the decorated function; absent for ``call(...)`` blocks."""

# OpenTelemetry GenAI semantic conventions, written on LLM boundaries when known.
GEN_AI_OPERATION_NAME: Final = "gen_ai.operation.name"
"""GenAI operation, ``chat`` for LLM boundaries."""
GEN_AI_PROVIDER_NAME: Final = "gen_ai.provider.name"
"""GenAI provider (``openai``, ``anthropic``…), from ``boundary(provider=...)``."""
GEN_AI_REQUEST_MODEL: Final = "gen_ai.request.model"
"""Requested model, from a ``model`` argument."""
GEN_AI_REQUEST_TEMPERATURE: Final = "gen_ai.request.temperature"
"""Sampling temperature, from a ``temperature`` argument."""
GEN_AI_REQUEST_TOP_P: Final = "gen_ai.request.top_p"
"""Nucleus sampling parameter, from a ``top_p`` argument."""
GEN_AI_REQUEST_MAX_TOKENS: Final = "gen_ai.request.max_tokens"
"""Token limit, from a ``max_tokens`` argument."""
GEN_AI_REQUEST_SEED: Final = "gen_ai.request.seed"
"""Sampling seed, from a ``seed`` argument."""
GEN_AI_RESPONSE_MODEL: Final = "gen_ai.response.model"
"""Model that answered, from the result's ``model`` field."""
GEN_AI_RESPONSE_ID: Final = "gen_ai.response.id"
"""Response id, from the result's ``id`` field."""
GEN_AI_RESPONSE_FINISH_REASONS: Final = "gen_ai.response.finish_reasons"
"""Why the model stopped, one per choice: from ``choices[].finish_reason`` or ``stop_reason`` (a string array)."""
GEN_AI_USAGE_INPUT_TOKENS: Final = "gen_ai.usage.input_tokens"
"""Prompt tokens, from the result's ``usage.input_tokens`` or ``usage.prompt_tokens``."""
GEN_AI_USAGE_OUTPUT_TOKENS: Final = "gen_ai.usage.output_tokens"
"""Completion tokens, from the result's ``usage.output_tokens`` or ``usage.completion_tokens``."""

# OpenInference conventions, written when CaptureOptions(openinference=True): Phoenix and other OpenInference
# backends then show kinds, inputs and outputs natively. Replay never reads them.
OPENINFERENCE_SPAN_KIND: Final = "openinference.span.kind"
"""``LLM``, ``TOOL``, ``RETRIEVER``, ``GUARDRAIL``, ``AGENT`` or ``CHAIN``."""
OPENINFERENCE_INPUT_VALUE: Final = "input.value"
"""The same text as :data:`INPUT`."""
OPENINFERENCE_INPUT_MIME_TYPE: Final = "input.mime_type"
"""``application/json``."""
OPENINFERENCE_OUTPUT_VALUE: Final = "output.value"
"""The same text as :data:`OUTPUT` (or :data:`ERROR`)."""
OPENINFERENCE_OUTPUT_MIME_TYPE: Final = "output.mime_type"
"""``application/json``."""
