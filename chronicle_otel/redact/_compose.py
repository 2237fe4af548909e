"""A user's redactor put to work: guarded (its failures redact), chained after the patterns, resolved for the codec."""

from __future__ import annotations

from .._internal.errors import handle_internal_errors
from ._json import _redact_json_strings
from ._patterns import PatternRedactor
from ._protocol import REDACTED, KeyFilter, Redactor


class _SafeRedactor:
    """A user's :class:`Redactor`: its exceptions are logged once and what it was asked about is redacted."""

    __slots__ = ("_key_guard", "_text_guard", "inner")

    def __init__(self, inner: Redactor) -> None:
        self.inner = inner
        name = type(inner).__qualname__
        self._key_guard = handle_internal_errors("redacting key names with %s", name, external=True)
        self._text_guard = handle_internal_errors("redacting text with %s", name, external=True)

    def redact_key(self, name: str) -> bool:
        try:
            return bool(self.inner.redact_key(name))
        except Exception as exc:
            self._key_guard.absorb(exc)
            return True

    def redact_text(self, text: str) -> str:
        try:
            out = self.inner.redact_text(text)
            if not isinstance(out, str):
                raise TypeError(f"redact_text() returned {type(out).__name__}, not str")
            return out
        except Exception as exc:
            self._text_guard.absorb(exc)
            return REDACTED


class _ChainedRedactor:
    """The built-in patterns, then a user's redactor."""

    __slots__ = ("first", "then")

    def __init__(self, first: PatternRedactor, then: Redactor) -> None:
        self.first = first
        self.then = _SafeRedactor(then)

    def redact_key(self, name: str) -> bool:
        return self.first.redact_key(name) or self.then.redact_key(name)

    def redact_text(self, text: str) -> str:
        return self.then.redact_text(self.first._redact_text(text, self.redact_key))

    def redact_json(self, data: bytes) -> bytes:
        return _redact_json_strings(self.first._redact_json(data, self.redact_key), self.then.redact_text)


def chain(patterns: PatternRedactor, user: Redactor | None) -> Redactor:
    """The redactor a configuration uses: the built-in patterns, then the user's own (guarded)."""
    if user is None:
        return patterns
    return _ChainedRedactor(patterns, user)


def resolve(redact: KeyFilter | Redactor) -> tuple[KeyFilter, Redactor | None]:
    """The key predicate and the value redactor (None: keys only) of a ``redact=`` argument of the codec.

    A user's own redactor or key predicate is wrapped so that its failures redact instead of raising: a failing
    rule is never a reason to record a secret, nor to break the call being recorded.
    """
    if isinstance(redact, (PatternRedactor, _SafeRedactor, _ChainedRedactor)):
        return redact.redact_key, redact
    if isinstance(redact, Redactor):
        safe = _SafeRedactor(redact)
        return safe.redact_key, safe
    return _guarded_key_filter(redact), None


def _guarded_key_filter(predicate: KeyFilter) -> KeyFilter:
    def redact_key(name: str) -> bool:
        try:
            return bool(predicate(name))
        except Exception:  # a failing predicate redacts
            return True

    return redact_key
