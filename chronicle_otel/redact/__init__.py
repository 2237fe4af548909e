r"""Redaction: secrets are replaced by ``[REDACTED]`` before anything leaves the process.

Usage::

    import chronicle_otel as chronicle

    chronicle.configure(
        redaction=chronicle.RedactionOptions(
            keys=[r"(?i)iban"],                   # more key names (whole-name regular expressions)
            values=[r"\bACME-[0-9]{8}\b"],          # more secret value formats
        )
    )

What is redacted, by default:

- **By key name.** The value of an argument, mapping key, dataclass or pydantic field whose name is a
  secret (:data:`DEFAULT_KEY_PATTERNS`: ``password``, ``api_key``, ``client_secret``/``clientSecret``,
  ``access_token``, ``Authorization``, ``private_key_pem``, ``connection_string``…) is replaced whole,
  whatever its type. The name matches as a whole or by its last ``_``/``-``/``.``/camelCase segment, so
  ``openai_api_key`` is redacted and ``max_tokens``, ``author`` or ``monkey`` are kept.
- **By value format.** Every string of a payload (input, output, error), of an exception's message and
  stack trace, and of a session variable is scanned for well-known secret formats
  (:data:`DEFAULT_VALUE_PATTERNS`): OpenAI and Anthropic keys, AWS access key ids, GitHub and Slack
  tokens, Stripe and Google API keys, JWTs, ``Bearer``/``Basic`` credentials, PEM private keys and the
  password of a URL (``postgres://app:[REDACTED]@db``). Only the secret is replaced.
- **By key name inside JSON text.** A string that holds a JSON object or array (an LLM tool call's
  ``function.arguments``) has the value of every secret-named key replaced by ``"[REDACTED]"`` in place: it stays
  valid JSON of the same shape. So do the pieces of such text a stream yields (streamed tool call arguments): the
  marker goes where the value starts, the rest of the value is removed from the pieces that follow.
- **Values repeated in an error.** A value redacted by key from a call's arguments is also removed from
  the exception the call raises (``raise ValueError(f"bad password {password}")``).

Configuration: :class:`~chronicle_otel.RedactionOptions` (``keys``, ``defaults``, ``values``,
``value_defaults``, ``redactor``) and the environment variables ``CHRONICLE_REDACT_KEYS`` and
``CHRONICLE_REDACT_VALUES`` (extra regular expressions, comma separated; ``false`` turns value formats
off). ``configure(redaction=False)`` redacts nothing.

Your own rules: any object with ``redact_key(name) -> bool`` and ``redact_text(text) -> str`` is a
:class:`Redactor`; pass it as ``RedactionOptions(redactor=...)`` and it runs after the built-in patterns.
Its exceptions are logged once and swallowed, and what it was asked about is then redacted whole:
instrumentation never breaks the call.

Cost: key names are looked up in a cache (one dict lookup per key). Value formats are found in each
payload's canonical JSON, once: a format's scan runs only when a character every match holds occurs
(a ``memchr``), as a literal-prefix regex search, and replaces in place. About 1 µs per KB of payload
(up to ~2.5 µs for JSON dense in ``_`` keys and UUIDs); see ``benchmarks/overhead.py`` (``nostore_novalues``).
Strings that are JSON text are found by a ``memchr`` for a backslash and, when there is one, one more search; only
such a string is parsed and its key names looked up.

API:
    :class:`Redactor`, :class:`PatternRedactor`, :data:`REDACTED`, :data:`DEFAULT_KEY_PATTERNS`,
    :data:`DEFAULT_SECRET_PATTERN`, :data:`DEFAULT_VALUE_PATTERNS`, :func:`key_filter`, and for cleaning the
    text of an exception as boundaries record it, :func:`scrub_text` and :func:`error_secrets`.
"""

from __future__ import annotations

from ._compose import chain as chain
from ._compose import resolve
from ._formats import DEFAULT_VALUE_PATTERNS
from ._json import redact_encoded, redact_tree
from ._keys import DEFAULT_KEY_PATTERNS, DEFAULT_SECRET_PATTERN, key_filter, redact_assignments
from ._patterns import PatternRedactor
from ._protocol import REDACTED, KeyFilter, Redactor
from ._scrub import collect_json_text_secrets, collect_secrets, error_secrets, scrub_text
from ._stream import redact_stream

# ``chain`` (the redactor a configuration builds) is not in __all__: it serves the parameter table.

__all__ = [
    "DEFAULT_KEY_PATTERNS",
    "DEFAULT_SECRET_PATTERN",
    "DEFAULT_VALUE_PATTERNS",
    "REDACTED",
    "KeyFilter",
    "PatternRedactor",
    "Redactor",
    "collect_json_text_secrets",
    "collect_secrets",
    "error_secrets",
    "key_filter",
    "redact_assignments",
    "redact_encoded",
    "redact_stream",
    "redact_tree",
    "resolve",
    "scrub_text",
]

for _value in list(globals().values()):  # tracebacks, docs, pickles and recorded class names show the public path
    if (isinstance(_value, type) or callable(_value)) and getattr(_value, "__module__", "").startswith(f"{__name__}."):
        _value.__module__ = __name__
del _value
