"""Tampering with trace files as an attacker would: span attributes rewritten, payload hashes made to match."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson

from chronicle_otel import semconv as sc
from chronicle_otel.store import payload_digest

_HASHES = {sc.INPUT: sc.INPUT_HASH, sc.OUTPUT: sc.OUTPUT_HASH, sc.ERROR: sc.ERROR_HASH}


def rewrite_spans(path: Path, change: Callable[[dict[str, Any], dict[str, dict[str, Any]]], None]) -> None:
    """Call ``change(span, attributes by key)`` on every span of an OTLP/JSON file, then write the file again."""
    lines = []
    for line in path.read_text().splitlines():
        doc = json.loads(line)
        for rs in doc["resourceSpans"]:
            for ss in rs["scopeSpans"]:
                for span in ss["spans"]:
                    change(span, {kv["key"]: kv for kv in span["attributes"]})
        lines.append(json.dumps(doc))
    path.write_text("\n".join(lines) + "\n")


def set_attribute(span: dict[str, Any], attrs: dict[str, dict[str, Any]], key: str, value: Any) -> None:
    """Set the string attribute ``key`` of ``span`` (JSON of ``value`` unless a string); a payload's hash follows."""
    text = value if isinstance(value, str) else orjson.dumps(value).decode()
    if key in attrs:
        attrs[key]["value"] = {"stringValue": text}
    else:
        span["attributes"].append({"key": key, "value": {"stringValue": text}})
    if key in _HASHES:
        set_attribute(span, attrs, _HASHES[key], payload_digest(text.encode()))


def tamper(path: Path, boundary: str, changes: dict[str, Any]) -> None:
    """Rewrite attributes of the spans of ``boundary`` in an OTLP/JSON file; payload hashes are recomputed."""

    def change(span: dict[str, Any], attrs: dict[str, dict[str, Any]]) -> None:
        if attrs[sc.BOUNDARY_NAME]["value"]["stringValue"] == boundary:
            for key, value in changes.items():
                set_attribute(span, attrs, key, value)

    rewrite_spans(path, change)
