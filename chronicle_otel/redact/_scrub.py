"""Error text scrubbed: the values a boundary redacted by key, removed from the exception it records."""

from __future__ import annotations

import contextvars
import json
from collections.abc import Iterable, Mapping
from typing import Any

import orjson

from ._json_text import is_json_text, json_text_edits
from ._keys import redact_assignments
from ._protocol import REDACTED, KeyFilter, Redactor


def scrub_text(redactor: Redactor | None, text: str, secrets: Iterable[str] = ()) -> str:
    """``text`` without the given secret strings, then without the secret value formats ``redactor`` finds.

    This is how the message and stack trace of a boundary's exception are cleaned before they are recorded:
    ``secrets`` are the values redacted by key name from the call's input (see :func:`error_secrets`), so
    ``raise ValueError(f"bad password {password}")`` records ``bad password [REDACTED]``.

    Args:
        redactor: the configuration's redactor, or None for no value formats.
        text: the text to clean.
        secrets: exact strings to replace by :data:`REDACTED`, wherever they occur. Longer ones go first, and all
            of them before ``redactor``: a redactor that rewrites only part of a secret must not hide it.

    Returns:
        ``text`` with every secret replaced.

    Example::

        scrub_text(PatternRedactor(), "login hunter22 failed", ["hunter22"])  # 'login [REDACTED] failed'
    """
    for secret in sorted(_escaped_forms(secrets), key=len, reverse=True):
        if secret in text:
            text = text.replace(secret, REDACTED)
    if redactor is not None:
        # what the text gives a secret name (``password=…`` in a message, a dict's repr in args)
        text = redact_assignments(text, redactor.redact_key)
        text = redactor.redact_text(text)
    return text


def _escaped_forms(secrets: Iterable[str]) -> set[str]:
    """Each secret as written in error text: as is, inside ``repr()`` (``f"{value!r}"``) and inside JSON."""
    forms: set[str] = set()
    for secret in secrets:
        if not secret:
            continue
        forms.add(secret)
        forms.add(repr(secret)[1:-1])
        forms.add(json.dumps(secret)[1:-1])
        forms.add(json.dumps(secret, ensure_ascii=False)[1:-1])
    forms.discard("")
    return forms


# The strings scrubbed from recent errors, by exception: an exception leaving several boundaries (or wrapped by
# an outer one, ``raise ... from``) is scrubbed of what every boundary it passed through redacted from its input.
_ERROR_SECRETS: contextvars.ContextVar[tuple[tuple[int, type, tuple[str, ...]], ...]] = contextvars.ContextVar(
    "chronicle_error_secrets", default=()
)
_ERROR_SECRETS_MAX = 16


def error_secrets(exc: BaseException, own: Iterable[str]) -> list[str]:
    """The strings to scrub from ``exc``'s text: ``own`` plus those of the boundaries it already left.

    An exception raised in an inner boundary and leaving outer ones (or wrapped, ``raise ... from``) is
    scrubbed at every level of what each boundary redacted from its input. The result is remembered for
    ``exc`` (in a :mod:`contextvars` variable holding the last few exceptions), for the boundaries it
    leaves next. Costs nothing when no secret is known.

    Args:
        exc: the exception a boundary is recording.
        own: the values redacted by key name from this boundary's input (the ``secrets`` list
            :func:`chronicle_otel.codec.encode` fills).

    Returns:
        The strings to pass to :func:`scrub_text`.
    """
    secrets = list(own)
    recent = _ERROR_SECRETS.get()
    if recent:
        chain: set[tuple[int, type]] = set()
        link: BaseException | None = exc
        while link is not None and len(chain) < 8:
            chain.add((id(link), type(link)))
            link = link.__cause__ or link.__context__
        for ident, cls, known in recent:
            if (ident, cls) in chain:
                secrets.extend(known)
    if secrets:
        entry = (id(exc), type(exc), tuple(dict.fromkeys(secrets)))
        _ERROR_SECRETS.set((entry, *recent[: _ERROR_SECRETS_MAX - 1]))
    return secrets


_MIN_SECRET_LENGTH = 4
_MAX_SECRETS = 64


def _collect_secrets(value: Any, out: list[str], depth: int = 0) -> None:
    """Append the text forms of ``value`` (a value redacted by key) to ``out``, to scrub them from errors.

    Nested containers and objects are followed a few levels; strings shorter than four characters are
    not remembered (replacing them would shred any message). Never raises.
    """
    try:
        if len(out) >= _MAX_SECRETS:
            return
        t = type(value)
        if t is str:
            if len(value) >= _MIN_SECRET_LENGTH:
                out.append(value)
            return
        if t is bool or value is None:
            return
        if t is int or t is float:
            text = str(value)
            if len(text) >= _MIN_SECRET_LENGTH:
                out.append(text)
            return
        if t is bytes or t is bytearray:
            text = bytes(value).decode("utf-8", "replace")
            if len(text) >= _MIN_SECRET_LENGTH:
                out.append(text)
            return
        if isinstance(value, str):
            _collect_secrets(str.__str__(value), out, depth)
            return
        if depth >= 4:
            return
        for item in _members(value):
            _collect_secrets(item, out, depth + 1)
    except Exception:  # a hostile container: what was collected so far stays
        return


def _members(value: Any) -> list[Any]:
    """The values of a mapping, the items of a list, tuple or set, or an object's fields (the first
    :data:`_MAX_SECRETS`); none for anything else. May raise (a hostile container): the caller guards."""
    if isinstance(value, Mapping):
        return list(value.values())[:_MAX_SECRETS]
    if isinstance(value, (list, tuple, set, frozenset)):
        return list(value)[:_MAX_SECRETS]
    fields = getattr(value, "__dict__", None)
    return list(fields.values())[:_MAX_SECRETS] if isinstance(fields, dict) else []


def collect_secrets(value: Any, out: list[str]) -> None:
    """Append to ``out`` the text forms of a value redacted by key name (bounded), for scrubbing error text."""
    _collect_secrets(value, out)


def collect_json_text_secrets(value: Any, redact_key: KeyFilter, out: list[str]) -> None:
    """Append to ``out`` the values that redaction by key name removes from the JSON text found in ``value`` (a
    tool call's arguments as ``'{"user": "bob", "password": "hunter22"}'``, at any depth of it), for scrubbing
    error text as :func:`collect_secrets` does for the values of secret-named keys of ``value`` itself.

    A call that raises ``ValueError(f"login failed for {password}")`` then records ``login failed for [REDACTED]``
    whether its password came as a keyword argument or inside JSON text. Bounded (depth, count); never raises.

    Args:
        value: a call's input, as it was handed to the encoder.
        redact_key: the redactor's key predicate (``Redactor.redact_key``).
        out: the list of secrets to extend (the one :func:`error_secrets` is given).
    """
    _json_text_secrets(value, redact_key, out, 0)


def _json_text_secrets(value: Any, redact_key: KeyFilter, out: list[str], depth: int) -> None:
    try:
        if len(out) >= _MAX_SECRETS or depth > _MAX_JSON_SECRET_DEPTH:
            return
        if type(value) is str:
            if not is_json_text(value):
                return
            for start, end, _ in json_text_edits(value, redact_key):
                raw = value[start:end]
                try:
                    found = orjson.loads(raw)
                except orjson.JSONDecodeError:  # not one value: the text as it stands
                    _collect_secrets(raw, out)
                    continue
                if type(found) is str and is_json_text(found):  # a string holding JSON text that holds a secret
                    _json_text_secrets(found, redact_key, out, depth + 1)
                else:
                    _collect_secrets(found, out)
            return
        for item in _members(value):
            _json_text_secrets(item, redact_key, out, depth + 1)
    except Exception:  # a hostile container: what was collected so far stays
        return


_MAX_JSON_SECRET_DEPTH = 6
