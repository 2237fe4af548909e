"""Typed values shown readably: ``Intent(category='refund', confidence=0.75)``, ``Decimal('49.99')``, ``Color.RED``…

A payload's JSON (the chronicle codec's, with its ``$type`` tags) becomes text a person reads, as Python would show
the values; nothing is decoded to a Python object, no recorded class is imported. Bounded in nodes, depth and size.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import dataclasses
import re
from typing import Any, TypeAlias

from ...codec import with_classes
from .._render import model_fields

MAX_DEPTH = 64
"""Values nested deeper than this are shown as ``…``."""
_WIDTH = 100
_INDENT = "    "

CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029]")
"""Characters never shown as they are (terminal escapes, line and paragraph separators)."""


def cap(text: object, limit: int) -> str:
    """``text`` (as text) cut at ``limit`` characters, the last one ``…`` when it was cut."""
    value = text if isinstance(text, str) else str(text)
    return value if len(value) <= limit else value[: limit - 1] + "…"


@dataclasses.dataclass
class _Group:
    """A container: ``open`` items ``close``, each item ``prefix`` + node; laid out on one line when it fits."""

    open: str
    close: str
    items: list[tuple[str, _Node]]
    one_tuple: bool = False


_Node: TypeAlias = "str | _Group"


class _Full(Exception):
    """The readable text reached its size bound."""


class _Converter:
    """JSON of the chronicle codec → display nodes, bounded in nodes and depth (``limit``: characters of a text)."""

    def __init__(self, limit: int, nodes: int = 200_000) -> None:
        self.limit = limit
        self.left = nodes

    def node(self, value: Any, depth: int = 0) -> _Node:
        self.left -= 1
        if self.left < 0 or depth > MAX_DEPTH:
            return "…"
        if isinstance(value, str):
            return _string(value)
        if value is None or isinstance(value, (bool, int, float)):
            return repr(value)
        if isinstance(value, list):
            return _Group("[", "]", [("", self.node(v, depth + 1)) for v in with_classes(value)])
        if isinstance(value, dict):
            tag = value.get("$type")
            if isinstance(tag, str):
                typed = self.tagged(tag, value, depth)
                if typed is not None:
                    return typed
            return _Group("{", "}", [(f"{_string(str(k))}: ", self.node(v, depth + 1)) for k, v in value.items()])
        return cap(repr(value), 200)

    def fields(self, head: str, data: Any, depth: int) -> _Node:
        if isinstance(data, dict):
            return _Group(f"{head}(", ")", [(f"{_field(k)}=", self.node(v, depth + 1)) for k, v in data.items()])
        return _Group(f"{head}(", ")", [("", self.node(data, depth + 1))])

    def tagged(self, tag: str, v: dict[str, Any], depth: int) -> _Node | None:
        short = _class_name(v.get("class"))
        if tag in ("pydantic", "dataclass", "namedtuple"):
            return self.fields(short, model_fields(v), depth)
        if tag == "enum":
            name = v.get("name")
            return f"{short}.{name}" if isinstance(name, str) and name.isidentifier() else self.fields(short, v, depth)
        if tag in ("tuple", "set", "frozenset"):
            items = v.get("items")
            if not isinstance(items, list):
                return None
            nodes = [("", self.node(x, depth + 1)) for x in items]
            if tag == "tuple":
                return _Group("(", ")", nodes, one_tuple=len(nodes) == 1)
            if not nodes:
                return f"{tag}()"
            return _Group("{", "}", nodes) if tag == "set" else _Group("frozenset({", "})", nodes)
        if tag == "dict":
            items = v.get("items")
            if not isinstance(items, list) or not all(isinstance(kv, list) and len(kv) == 2 for kv in items):
                return None
            return _Group(
                "{", "}", [(f"{_one_line(self.node(k, depth + 1))}: ", self.node(x, depth + 1)) for k, x in items]
            )
        if tag == "exception":
            args = v.get("args")
            nodes = [("", self.node(a, depth + 1)) for a in args] if isinstance(args, list) else []
            if not nodes and isinstance(v.get("message"), str):
                nodes = [("", _string(v["message"]))]
            return _Group(f"{short}(", ")", nodes)
        if tag == "custom":
            return self.fields(short, v.get("data"), depth)
        if tag == "unencodable":
            return f"<unencodable {cap(v.get('class', '?'), 200)}: {cap(v.get('repr', ''), 500)}>"
        return self.scalar(tag, v)

    def scalar(self, tag: str, v: dict[str, Any]) -> _Node | None:
        value = v.get("value")
        if tag == "decimal" and isinstance(value, str):
            return f"Decimal({_string(value)})"
        if tag == "uuid" and isinstance(value, str):
            return f"UUID({_string(value)})"
        if tag == "int" and isinstance(value, str) and re.fullmatch(r"-?[0-9]+", value):
            return value
        if tag == "float" and isinstance(value, str):
            return f"float({_string(value)})"
        if tag == "path" and isinstance(value, str):
            return f"{'PurePath' if v.get('pure') else 'Path'}({_string(value)})"
        iso = v.get("iso")
        if tag in ("datetime", "date", "time") and isinstance(iso, str):
            tz = v.get("tz")
            zone = f", tz={_string(tz)}" if isinstance(tz, str) else ""
            return f"{tag}({_string(iso)}{zone})"
        if tag == "timedelta":
            parts = [f"{k}={v[k]}" for k in ("days", "seconds", "microseconds") if isinstance(v.get(k), int) and v[k]]
            return f"timedelta({', '.join(parts)})"
        if tag == "complex":
            return f"complex({_one_line(self.node(v.get('real')))}, {_one_line(self.node(v.get('imag')))})"
        if tag == "bytes" and isinstance(v.get("b64"), str):
            try:
                raw = base64.b64decode(v["b64"][: 4 * self.limit], validate=True)
            except (binascii.Error, ValueError):
                return f"bytes(b64={_string(cap(v['b64'], 200))})"
            return cap(repr(raw), self.limit)
        return None


def _class_name(name: object) -> str:
    """``Intent`` of ``supportbot.agent.Intent``; a name that is no identifier is quoted."""
    if not isinstance(name, str) or not name:
        return "object"
    short = name.rsplit(".", 1)[-1]
    return short if short.isidentifier() else f"<{cap(name, 200)}>"


def _field(name: object) -> str:
    text = str(name)
    return text if text.isidentifier() else _string(text)


def _string(text: str) -> str:
    """A string as a Python literal; a long text of several lines keeps its line breaks in triple quotes."""
    if "\n" in text and len(text) > 40:
        body = CONTROL.sub(lambda m: ascii(m.group())[1:-1], text).replace('"""', '\\"\\"\\"')
        if body.endswith('"'):
            body = body[:-1] + '\\"'
        return f'"""{body}"""'
    return repr(text)


def _one_line(node: _Node) -> str:
    text = _compact(node, 400)
    return text if text is not None else "…"


def _compact(node: _Node, limit: int) -> str | None:
    """``node`` on one line when it takes at most ``limit`` characters; else None (stops as soon as it knows)."""
    if isinstance(node, str):
        return node if len(node) <= limit and "\n" not in node else None
    used = len(node.open) + len(node.close) + (1 if node.one_tuple else 0)
    parts = []
    for i, (prefix, child) in enumerate(node.items):
        sep = ", " if i else ""
        text = _compact(child, limit - used - len(sep) - len(prefix))
        if text is None:
            return None
        parts.append(f"{sep}{prefix}{text}")
        used += len(parts[-1])
        if used > limit:
            return None
    return f"{node.open}{''.join(parts)}{',' if node.one_tuple else ''}{node.close}"


def _layout(node: _Node, indent: str, out: list[str], left: list[int]) -> None:
    text = _compact(node, max(_WIDTH - len(indent), 40))
    if text is None and isinstance(node, str):
        text = node
    if text is not None:
        _emit(text, out, left)
        return
    assert isinstance(node, _Group)
    inner = indent + _INDENT
    _emit(node.open + "\n", out, left)
    for prefix, child in node.items:
        _emit(inner + prefix, out, left)
        _layout(child, inner, out, left)
        _emit(",\n", out, left)
    _emit(indent + node.close, out, left)


def _emit(text: str, out: list[str], left: list[int]) -> None:
    if len(text) > left[0]:
        out.append(text[: left[0]])
        raise _Full
    left[0] -= len(text)
    out.append(text)


def readable_text(value: Any, head: str = "", *, error: bool = False, limit: int) -> str:
    """``value`` (a payload's JSON) as text a person reads: typed values as Python shows them, a call's input as
    ``name(arg=value)``, an error as ``ValueError('message')``; at most ``limit`` characters (one more means it was
    cut)."""
    converter = _Converter(limit)
    node: _Node
    if error and isinstance(value, dict) and "$type" not in value:
        node = converter.tagged(
            "exception", {"class": value.get("type"), "args": value.get("args"), "message": value.get("message")}, 0
        ) or converter.node(value)
        if isinstance(node, _Group) and isinstance(value.get("attrs"), dict):
            node.items.extend((f"{_field(k)}=", converter.node(x, 1)) for k, x in value["attrs"].items())
    elif head and isinstance(value, dict) and "$type" not in value:
        node = converter.fields(head, value, 0)
    else:
        node = converter.node(value)
    out: list[str] = []
    with contextlib.suppress(_Full, RecursionError):
        _layout(node, "", out, [limit + 1])
    return "".join(out)


# --------------------------------------------------------------------------------------------------------------------
