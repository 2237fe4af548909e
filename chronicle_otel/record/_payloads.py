"""Payload attributes: a call's input, output and error as capped JSON text, hash and truncation flag.

A value is encoded once (by the caller), to the canonical JSON of :mod:`chronicle_otel.codec` with the
configured redaction. Its attribute holds at most ``max_attribute_length`` characters; the hash
(``sha256:<hex>``, the payload's address in the store) is always that of the whole encoding. A payload
cut on the span is kept whole in ``pending``, for the exporter to store.

An exception is recorded three ways, all scrubbed of secrets the same way (the values redacted from
the call's input, then the secret value formats): the ``chronicle.error`` envelope
``{type, message, args}``, the OpenTelemetry ``exception`` event with its stack trace, and the span
status description.
"""

from __future__ import annotations

import contextlib
import functools
import os
import re
import site
import sysconfig
import traceback
from collections.abc import Callable
from typing import Any, Final

import orjson
from opentelemetry import trace as trace_api

from .._internal.buffer import Payload
from .._internal.digest import payload_digest
from .._internal.errors import warn_once
from .._internal.names import module_name, qualified_name
from .._internal.unreplayable import MARK, classes_in
from ..codec import encode, encode_unscanned, exception_attrs, join_encoded, to_json_value, value_scan
from ..redact import Redactor, redact_stream, scrub_text
from ..semconv import UNREPLAYABLE, PayloadKeys

Pending = list[Payload]
"""Whole payloads cut on the span, for the exporter to store."""


def put_payload(attrs: dict[str, Any], pending: Pending, keys: PayloadKeys, data: bytes, max_length: int) -> None:
    """Put encoded ``data`` into ``attrs``: its text capped at ``max_length`` characters, its hash and its
    truncation flag; a cut payload also goes to ``pending``. The classes of placeholders it holds are added to
    ``attrs[UNREPLAYABLE]``."""
    digest = payload_digest(data)
    if MARK in data:
        known = attrs.get(UNREPLAYABLE)
        found = classes_in(data)
        attrs[UNREPLAYABLE] = tuple(dict.fromkeys((*known, *found))) if isinstance(known, tuple) else found
    if len(data) <= max_length:
        text = data.decode()
    else:
        text = data[: max_length * 4].decode("utf-8", "ignore") if len(data) > max_length * 4 else data.decode()
        if len(text) > max_length:
            text = text[:max_length]
            attrs[keys.truncated] = True
            pending.append((digest, data))
    attrs[keys.text] = text
    attrs[keys.hash] = digest


class EncodedItem:
    """A stream item encoded when it was yielded (redacted by key name, not yet scanned for secret values)."""

    __slots__ = ("data",)

    def __init__(self, data: bytes) -> None:
        self.data = data


_UNCHANGING: Final = frozenset({str, int, float, bool, bytes, type(None)})

MAX_STREAM_BYTES: Final = 16 << 20
"""What one recorded stream keeps of its items, at most: the items past it are recorded as placeholders (a
stream of audio frames or file chunks never holds its whole length in memory)."""

_PAST_THE_BUDGET: Final = EncodedItem(
    orjson.dumps(
        {
            "$type": "unencodable",
            "class": "stream item",
            "repr": f"past the {MAX_STREAM_BYTES >> 20} MiB kept of a stream",
        },
        option=orjson.OPT_SORT_KEYS,
    )
)


def item_snapshot(redactor: Redactor | None, budget: int | None = None) -> Callable[[Any], Any]:
    """What a stream driver keeps of an item: the item when it cannot change, else its encoding at that moment (a
    partial message updated and yielded again, a chunk the consumer marks): the recording holds what was yielded.
    Past ``budget`` bytes of items (default :data:`MAX_STREAM_BYTES`), a placeholder (said once)."""
    budget = MAX_STREAM_BYTES if budget is None else budget
    left = [budget]

    def snapshot(item: Any) -> Any:
        t = type(item)
        if t in _UNCHANGING:  # what the item takes in the recording: UTF-8 (at most 4 bytes a character), base64
            if t is str:
                left[0] -= len(item) if item.isascii() else 4 * len(item)
            else:
                left[0] -= len(item) * 4 // 3 if t is bytes else 8
            kept = item
        else:
            try:
                kept = EncodedItem(encode_unscanned(item, redact=redactor)[0])
            except Exception:  # the encoder never raises; should it, the item is encoded at the end, as it is then
                return item
            left[0] -= len(kept.data)
        if left[0] < 0:
            warn_once(
                "stream-budget",
                "chronicle_otel: a stream yielded more than the %d MiB chronicle keeps of one stream: the items past "
                "it are recorded as placeholders",
                budget >> 20,
            )
            return _PAST_THE_BUDGET
        return kept

    return snapshot


def encode_stream(items: list[Any], redactor: Redactor | None) -> bytes:
    """The items a stream yielded, encoded and redacted, a secret spread over several items too."""
    if any(type(item) is EncodedItem for item in items):  # a list's encoding is its items' encodings, joined
        parts = [
            item.data if type(item) is EncodedItem else encode_unscanned(item, redact=redactor)[0] for item in items
        ]
        data, scan = join_encoded(parts), value_scan(redactor)
    else:
        data, scan = encode_unscanned(items, redact=redactor)
    if redactor is not None:
        data = redact_stream(data, redactor)
    return data if scan is None else scan(data)


def exception_message(exc: BaseException) -> str:
    """``str(exc)``, or a placeholder when that raises."""
    try:
        return str(exc)
    except Exception:
        return f"<{type(exc).__qualname__}: str() failed>"


class _ErrorScrubber:
    """The configuration's key names, and text cleaned with :func:`scrub_text` of the call's secrets."""

    __slots__ = ("redactor", "secrets")

    def __init__(self, redactor: Redactor, secrets: list[str]) -> None:
        self.redactor = redactor
        self.secrets = secrets

    def redact_key(self, name: str) -> bool:
        return self.redactor.redact_key(name)

    def redact_text(self, text: str) -> str:
        return scrub_text(self.redactor, text, self.secrets)


def secrets_of_error(exc: BaseException, redactor: Redactor) -> list[str]:
    """The values ``exc`` holds under secret names, in its args or its public attributes (``exc.api_key``,
    ``RuntimeError({"db_password": …})``): its message may repeat them, and is scrubbed of them."""
    found: list[str] = []
    with contextlib.suppress(Exception):  # what was found before a failure is scrubbed
        to_json_value(
            {"args": list(exc.args), "attrs": exception_attrs(exc)}, redact=redactor.redact_key, secrets=found
        )
    return found


def error_payload(exc: BaseException, redactor: Redactor | None, secrets: list[str]) -> bytes:
    """The encoded ``{type, message, args[, attrs]}`` of ``exc``, every string of it scrubbed as the exception
    event's text is (so replay can compare a new error's message with the recorded one); ``attrs`` are its public
    plain-data attributes (an SDK error's ``status_code``, ``body``)."""
    cls = type(exc)
    envelope: dict[str, Any] = {
        "type": qualified_name(cls),  # under ``python -m pkg.mod``, pkg.mod's: the name a replay can resolve
        "message": exception_message(exc),
        "args": list(exc.args),
    }
    attrs = exception_attrs(exc)
    if attrs:
        envelope["attrs"] = attrs
    return encode(envelope, redact=None if redactor is None else _ErrorScrubber(redactor, secrets))


# the OpenTelemetry exception event, as the SDK's Span.record_exception writes it
_EXCEPTION_EVENT: Final = "exception"
_EXCEPTION_TYPE: Final = "exception.type"
_EXCEPTION_MESSAGE: Final = "exception.message"
_EXCEPTION_STACKTRACE: Final = "exception.stacktrace"
_EXCEPTION_ESCAPED: Final = "exception.escaped"


_FILE_LINE: Final = re.compile(r'^(\s*File ")([^"\n]+)(", line )', re.MULTILINE)


@functools.lru_cache(maxsize=1)
def _install_roots() -> tuple[tuple[str, str], ...]:
    """Where installed packages and the standard library lie, with the label a stack trace shows for each."""
    roots: dict[str, str] = {}
    for key in ("purelib", "platlib"):
        roots.setdefault(sysconfig.get_paths().get(key, ""), "<site-packages>")
    with contextlib.suppress(Exception):
        for path in (*site.getsitepackages(), site.getusersitepackages()):
            roots.setdefault(path, "<site-packages>")
    for key in ("stdlib", "platstdlib"):
        roots.setdefault(sysconfig.get_paths().get(key, ""), "<stdlib>")
    return tuple((os.path.normpath(path), label) for path, label in roots.items() if path)


def portable_paths(stacktrace: str) -> str:
    """``stacktrace`` with each ``File "..."`` path written relative to where it lies: an installed package
    (``<site-packages>/...``), the standard library (``<stdlib>/...``), the working directory (``pkg/mod.py``) or
    the home directory (``~/...``); any other path is left as it is. The deepest root wins (a virtualenv inside the
    project is site-packages, not the project)."""
    roots = list(_install_roots())
    with contextlib.suppress(OSError):
        roots.append((os.getcwd(), ""))
    with contextlib.suppress(RuntimeError, KeyError):
        roots.append((os.path.expanduser("~"), "~"))
    roots = sorted({r for r in roots if r[0] and r[0] != os.sep}, key=lambda r: len(r[0]), reverse=True)

    def relative(match: re.Match[str]) -> str:
        path = match.group(2)
        if os.path.isabs(path):
            for root, label in roots:
                if path.startswith(root + os.sep):
                    rest = path[len(root) + 1 :]
                    path = f"{label}/{rest}" if label else rest
                    break
        return f"{match.group(1)}{path}{match.group(3)}"

    return _FILE_LINE.sub(relative, stacktrace)


def add_exception_event(
    span: trace_api.Span, exc: BaseException, scrub: Callable[[str], str], *, absolute_paths: bool = False
) -> None:
    """``span.record_exception(exc, escaped=True)``, with the message and stack trace passed through ``scrub``, and
    the stack trace's file paths made :func:`portable <portable_paths>` unless ``absolute_paths``."""
    cls = type(exc)
    module = module_name(cls.__module__)
    try:
        stacktrace = "".join(traceback.format_exception(cls, exc, exc.__traceback__))
        if not absolute_paths:
            stacktrace = portable_paths(stacktrace)
    except Exception:
        stacktrace = ""
    span.add_event(
        _EXCEPTION_EVENT,
        {
            _EXCEPTION_TYPE: f"{module}.{cls.__qualname__}" if module and module != "builtins" else cls.__qualname__,
            _EXCEPTION_MESSAGE: scrub(exception_message(exc)),
            _EXCEPTION_STACKTRACE: scrub(stacktrace),
            _EXCEPTION_ESCAPED: "True",
        },
    )
