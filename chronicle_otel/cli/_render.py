"""Recorded payloads shown the way Python shows values: ``Intent(category='refund', confidence=0.75)``.

The canonical JSON of a payload is rendered from its type tags alone: no class is looked up, imported or called, so
any trace, trusted or not, renders the same way. Typed objects appear under their class's short name, with their
fields; ``Decimal('49.99')``, ``UUID('…')``, tuples, sets and bytes as Python writes them; dates and times with their
ISO text (``datetime('2026-11-30T10:00:00+00:00')``).
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
from typing import Any

import orjson

from .._assembled import Assembled, assemble
from .._internal.unreplayable import classes_in
from ..codec import TAG, with_classes
from ..model import Boundary


@dataclasses.dataclass
class Seq:
    """A bracketed sequence of items: ``open`` item, item… ``close``; each item a ``(prefix, node)`` pair."""

    open: str
    items: list[tuple[str, Node]]
    close: str
    one_tuple: bool = False  # a one-item tuple keeps its comma
    joined: bool = False  # implicit string concatenation: items without commas


Node = str | Seq

_CUT_ITEMS = 40
"""Items of a list or a mapping rendered on one cut line (the line is cut anyway)."""
_CUT_DEPTH = 12
_MAX_DEPTH = 100  # even in full: rendering stays far from the interpreter's recursion limit


UNREPLAYABLE = "unreplayable: {} recorded as unencodable"
"""The marker of a boundary whose payloads hold values recorded as placeholders (``show``, ``view`` and ``diff``)."""


def unreplayable(b: Boundary) -> str | None:
    """:data:`UNREPLAYABLE` for a boundary whose input, output or error holds ``unencodable`` placeholders (read from
    the payloads, or from the span's ``chronicle.unreplayable`` when a payload is cut); None when it holds none."""
    names = dict.fromkeys(b.unreplayable)
    if b.raw_input is not None and "unencodable" in b.raw_input.text:
        names.update(dict.fromkeys(classes_in(b.raw_input.text.encode("utf-8", "surrogatepass"))))
    return UNREPLAYABLE.format(", ".join(names)) if names else None


def assembled_of(b: Boundary, value: Any) -> Assembled | None:
    """The message a streamed call's recorded items (``value``, the payload's JSON) carried; None for a call that did
    not stream or a stream of other things. Plain strings are text only for an ``llm`` boundary."""
    if not b.stream or not isinstance(value, list):
        return None
    return assemble(value, strings=b.kind == "llm")


def parse(text: str | None) -> tuple[bool, Any]:
    """``(True, value)`` for a canonical JSON text, ``(False, text)`` when it is not JSON (a cut payload)."""
    if text is None:
        return True, None
    try:
        return True, orjson.loads(text)
    except orjson.JSONDecodeError:
        return False, text


def render(value: Any, *, width: int | None = 100, error: bool = False, args: bool = False) -> list[str]:
    """The lines that show ``value`` (parsed canonical JSON).

    Args:
        value: the payload, as JSON (type tags included).
        width: cut to one line of this many characters; None: every character, broken into indented lines
            where one line would be longer than 100 characters.
        error: ``value`` is an exception payload (``{"type", "message", "args"}``).
        args: ``value`` is a call's arguments (``{param: value}``): shown as ``name=value, …``.
    """
    limit = None if width is None else max(width, 20)
    if error and isinstance(value, dict) and "type" in value:
        node = _error(value, limit)
    elif args and isinstance(value, dict) and TAG not in value:
        node = Seq("", [(f"{k}=", _node(v, limit, 1)) for k, v in _cut(list(value.items()), limit)], "")
    else:
        node = _node(value, limit, 0)
    if width is not None:
        line = flat(node, width + 1)
        return [line if len(line) <= width else line[: width - 1] + "…"]
    if isinstance(node, Seq) and not node.open:  # arguments: one per line when they do not fit on one
        one = flat(node)
        if len(one) <= 100:
            return [one]
        return [line for prefix, item in node.items for line in pretty(item, 100, 0, prefix, ",")]
    return pretty(node, 100, 0)


def flat(node: Node, budget: int | None = None) -> str:
    """``node`` on one line; with a ``budget``, at least that many characters when it is longer (then cut)."""
    if isinstance(node, str):
        return node
    pieces = [node.open]
    size = len(node.open)
    for i, (prefix, item) in enumerate(node.items):
        if i:
            pieces.append(" " if node.joined else ", ")
        text = prefix + flat(item, None if budget is None else max(budget - size, 0))
        pieces.append(text)
        size += len(text) + 2
        if budget is not None and size > budget:
            return "".join(pieces)
    if node.one_tuple and len(node.items) == 1:
        pieces.append(",")
    pieces.append(node.close)
    return "".join(pieces)


def pretty(node: Node, width: int, indent: int, prefix: str = "", tail: str = "") -> list[str]:
    """``node`` as indented lines, each item of a sequence too long for one line on its own line."""
    pad = " " * indent
    one = prefix + flat(node) + tail
    if isinstance(node, str) or not node.items or indent + len(one) <= width:
        return [pad + one]
    lines = [pad + prefix + node.open]
    for item_prefix, item in node.items:
        lines += pretty(item, width, indent + 4, item_prefix, "" if node.joined else ",")
    lines.append(pad + node.close + tail)
    return lines


def _cut(items: list[Any], limit: int | None) -> list[Any]:
    return items if limit is None or len(items) <= _CUT_ITEMS else items[:_CUT_ITEMS]


def _more(node: Seq, total: int, limit: int | None) -> Seq:
    if limit is not None and total > len(node.items):
        node.items.append(("", "…"))
    return node


def _short(class_name: Any) -> str:
    """``Intent`` of ``supportbot.agent.Intent``; ``Outer.Inner`` stays whole when the module is unknown."""
    name = str(class_name) if class_name else "object"
    parts = name.split(".")
    start = len(parts) - 1
    while start > 0 and parts[start - 1][:1].isupper():  # nested classes keep their outer class
        start -= 1
    return ".".join(parts[start:])


def _string(text: str, limit: int | None) -> Node:
    if limit is not None and len(text) > limit * 2:
        text = text[: limit * 2]
    if limit is None and "\n" in text.rstrip("\n") and len(text) > 60:  # a long text: one line of code per line
        return Seq("(", [("", repr(line)) for line in text.splitlines(keepends=True)], ")", joined=True)
    return repr(text)


def _node(value: Any, limit: int | None, depth: int) -> Node:
    if isinstance(value, str):
        return _string(value, limit)
    if value is None or isinstance(value, (bool, int, float)):
        return repr(value)
    if depth > (_CUT_DEPTH if limit is not None else _MAX_DEPTH):  # --full too: a hostile payload nests deep
        return "…"
    if isinstance(value, list):
        items = _cut(with_classes(value), limit)
        return _more(Seq("[", [("", _node(v, limit, depth + 1)) for v in items], "]"), len(value), limit)
    if not isinstance(value, dict):
        return repr(value)
    tag = value.get(TAG)
    if not isinstance(tag, str):
        pairs = _cut(list(value.items()), limit)
        seq = Seq("{", [(f"{k!r}: ", _node(v, limit, depth + 1)) for k, v in pairs], "}")
        return _more(seq, len(value), limit)
    return _tagged(tag, value, limit, depth)


def model_fields(v: dict[str, Any]) -> Any:
    """The fields of a tagged model or dataclass: ``fields`` (the set ones), or ``data`` as recorded before."""
    return v["fields"] if "fields" in v else v.get("data")


def _fields(data: Any, limit: int | None, depth: int) -> list[tuple[str, Node]]:
    if isinstance(data, dict) and TAG not in data:
        return [(f"{k}=", _node(v, limit, depth + 1)) for k, v in _cut(list(data.items()), limit)]
    return [("", _node(data, limit, depth + 1))]


def _call(name: str, arg: Any) -> str:
    return f"{name}({str(arg)!r})"


def _tagged(tag: str, v: dict[str, Any], limit: int | None, depth: int) -> Node:
    if tag in ("dataclass", "pydantic", "namedtuple"):
        return Seq(f"{_short(v.get('class'))}(", _fields(model_fields(v), limit, depth), ")")
    if tag == "enum":
        return f"{_short(v.get('class'))}.{v.get('name')}"
    if tag == "exception":
        return _error({"type": v.get("class"), "message": v.get("message"), "args": v.get("args")}, limit, depth)
    if tag == "custom":
        return Seq(f"{_short(v.get('class'))}(", [("", _node(v.get("data"), limit, depth + 1))], ")")
    if tag == "decimal":
        return _call("Decimal", v.get("value"))
    if tag == "uuid":
        return _call("UUID", v.get("value"))
    if tag == "path":
        return _call("PurePath" if v.get("pure") else "Path", v.get("value"))
    if tag in ("int", "float"):
        text = str(v.get("value"))
        return text if tag == "int" else f"float({text!r})"
    if tag in ("datetime", "date", "time"):
        zone = f", tz={str(v['tz'])!r}" if isinstance(v.get("tz"), str) else ""
        return f"{tag}({str(v.get('iso'))!r}{zone})"
    if tag == "timedelta":
        parts = [f"{k}={v[k]}" for k in ("days", "seconds", "microseconds") if v.get(k)]
        return f"timedelta({', '.join(parts)})"
    if tag == "bytes":
        return _bytes(v.get("b64"), limit)
    if tag in ("tuple", "set", "frozenset"):
        raw = v.get("items")
        items = raw if isinstance(raw, list) else []
        nodes = [("", _node(x, limit, depth + 1)) for x in _cut(items, limit)]
        if tag == "tuple":
            return _more(Seq("(", nodes, ")", one_tuple=True), len(items), limit)
        if not items:
            return f"{tag}()"
        seq = _more(Seq("{", nodes, "}"), len(items), limit)
        return seq if tag == "set" else Seq("frozenset(", [("", seq)], ")")
    if tag == "dict":
        raw = v.get("items")
        pairs = [p for p in raw if isinstance(p, list) and len(p) == 2] if isinstance(raw, list) else []
        nodes = [(flat(_node(k, limit, depth + 1)) + ": ", _node(x, limit, depth + 1)) for k, x in _cut(pairs, limit)]
        return _more(Seq("{", nodes, "}"), len(pairs), limit)
    if tag == "complex":
        return (
            f"complex({flat(_node(v.get('real'), limit, depth + 1))}, {flat(_node(v.get('imag'), limit, depth + 1))})"
        )
    if tag == "unencodable":
        return f"<unencodable {v.get('class')}: {v.get('repr')}>"
    rest = {k: x for k, x in v.items() if k not in (TAG, "class")}
    return Seq(f"<{tag} {_short(v.get('class'))}: ", _fields(rest, limit, depth), ">")


def _bytes(b64: Any, limit: int | None) -> str:
    text = str(b64 or "")
    if limit is not None:
        text = text[: (limit * 2 // 4) * 4]
    try:
        return repr(base64.b64decode(text, validate=True))
    except (binascii.Error, ValueError):
        return f"bytes(<base64 {text[:40]!r}…>)"


def _error(value: dict[str, Any], limit: int | None, depth: int = 0) -> Node:
    """An exception payload as ``RefundError('amount 500 too large')``, with its plain-data attributes."""
    args = value.get("args")
    items: list[tuple[str, Node]]
    if isinstance(args, list) and args:
        items = [("", _node(a, limit, depth + 1)) for a in _cut(args, limit)]
    else:
        message = value.get("message")
        items = [("", _string(str(message), limit))] if message else []
    attrs = value.get("attrs")
    if isinstance(attrs, dict) and TAG not in attrs:
        items += [(f"{k}=", _node(x, limit, depth + 1)) for k, x in _cut(list(attrs.items()), limit)]
    return Seq(f"{_short(value.get('type'))}(", items, ")")
