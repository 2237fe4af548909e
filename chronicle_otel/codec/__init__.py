"""The chronicle-json codec: canonical JSON for boundary payloads.

Usage::

    from chronicle_otel.codec import encode, decode

    data = encode({"order": Order(symbol="MSFT", qty=3)})  # bytes: sorted keys, no whitespace
    decode(data, allow=["myapp."])                           # Order rebuilt: its module is allowed

Encoding never fails. JSON natives pass through; other values become tagged objects
``{"$type": tag, ...}`` that carry what the decoder needs: pydantic models, dataclasses, enums,
datetimes, Decimal, UUID, bytes, tuples, sets, paths, exceptions, big integers, NaN/Inf and types
registered with :func:`register_type`. What cannot be encoded becomes
``{"$type": "unencodable", "class": ..., "repr": ...}``; cycles and values nested deeper than
:data:`MAX_DEPTH` are cut the same way.

A pydantic model is written compactly and rebuilt exactly (values, ``model_fields_set``, extras): only the fields
that were set, a nested model of its field's own annotation class without its tag, and in a list, the class of a run
of models of one class once (a stream of SDK chunks). Recordings of earlier versions (every field, ``unset``) decode
as before; :func:`same_encoding` compares one with a value encoded now.

Decoding is safe on untrusted data: it never unpickles, never imports a module named in the data and
rebuilds only a class of the kind the tag names (a dataclass, a pydantic model, an enum, a namedtuple,
an :class:`Exception` subclass: its constructor, then the recorded fields put back) whose own ``__module__`` and
``__qualname__`` are exactly the recorded name, and that is registered, or allowed by module prefix
(``allow=["myapp"]``) and already imported; otherwise the decoder returns an :class:`UnresolvedObject`
that keeps the class name and the plain data. Depth, size and digit limits raise :class:`CodecError`.
"""

from __future__ import annotations

from ..errors import CodecError as CodecError
from ..redact import DEFAULT_SECRET_PATTERN, REDACTED, key_filter
from ..redact import KeyFilter as KeyFilter
from ..redact import PatternRedactor as PatternRedactor
from ..redact import Redactor as Redactor
from ..redact import collect_secrets as collect_secrets
from ..redact import redact_assignments as redact_assignments
from ..redact import redact_encoded as redact_encoded
from ..redact import redact_tree as redact_tree
from ..redact import resolve as resolve
from ._classes import ENDS_ITERATION as ENDS_ITERATION
from ._classes import find_loaded_class
from ._decode import UnresolvedObject, decode, decode_value
from ._encode import encode, encode_unscanned, to_json_value, value_scan
from ._format import CODEC_VERSION, MAX_DECODE_BYTES, MAX_DECODE_DEPTH, MAX_DEPTH, MAX_INT_DIGITS
from ._format import TAG as TAG
from ._models import join_encoded, with_classes
from ._registry import AllowList as AllowList
from ._registry import register_type
from ._upgrade import same_encoding, upgrade_encoding
from ._walk import exception_attrs as exception_attrs

# Names imported as themselves (``X as X``) are not in __all__ but stay reachable here, as before the codec became a
# package: the tag key, an exception's plain attributes, the allow-list type and the redaction names it uses; and the
# exceptions never rebuilt although they are Exceptions (the replay names them).

__all__ = [
    "CODEC_VERSION",
    "DEFAULT_SECRET_PATTERN",
    "MAX_DECODE_BYTES",
    "MAX_DECODE_DEPTH",
    "MAX_DEPTH",
    "MAX_INT_DIGITS",
    "REDACTED",
    "UnresolvedObject",
    "decode",
    "decode_value",
    "encode",
    "encode_unscanned",
    "find_loaded_class",
    "join_encoded",
    "key_filter",
    "register_type",
    "same_encoding",
    "to_json_value",
    "upgrade_encoding",
    "value_scan",
    "with_classes",
]

for _value in list(globals().values()):  # tracebacks, docs, pickles and recorded class names show the public path
    if (isinstance(_value, type) or callable(_value)) and getattr(_value, "__module__", "").startswith(f"{__name__}."):
        _value.__module__ = __name__
del _value
