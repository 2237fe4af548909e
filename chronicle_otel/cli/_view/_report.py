"""A replay report read back from its JSON (``json.dumps(dataclasses.asdict(run.report))``), every field checked."""

from __future__ import annotations

import json
from pathlib import Path

import orjson

from ...errors import ChronicleError
from ...replaying import DriftCause, Finding, FindingKind, ReplayReport
from .._output import clean

SECTIONS = (
    ("divergences", "Divergences"),
    ("drift", "Drift"),
    ("changes", "Changes"),
    ("intended", "Intended (declared changes)"),
    ("overrides", "Overrides"),
    ("session", "Session variables that differ from the recording"),
)
"""The report's lists of findings, by field name, with the title the page gives each."""

_MAX_REPORT_BYTES = 16 * 1024 * 1024


def load_report(path: str | Path) -> ReplayReport:
    """Read a replay report written as JSON (``json.dumps(dataclasses.asdict(run.report))``).

    Args:
        path: the JSON file.

    Returns:
        The report.

    Raises:
        ChronicleError: the file cannot be read, is not JSON or not a report.
    """
    return read_report(path)[0]


def read_report(path: str | Path) -> tuple[ReplayReport, str | None]:
    """The report in the JSON file ``path``, and the trace id it names (None when it names none).

    Raises:
        ChronicleError: the file cannot be read, is not JSON or not a report.
    """
    where = f"--report {clean(path)}"
    try:
        with open(path, "rb") as f:
            raw = f.read(_MAX_REPORT_BYTES + 1)
    except OSError as exc:
        raise ChronicleError(f"{where}: {exc.strerror or exc}") from None
    if len(raw) > _MAX_REPORT_BYTES:
        raise ChronicleError(f"{where}: larger than {_MAX_REPORT_BYTES // (1024 * 1024)} MB")
    try:
        data = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise ChronicleError(f"{where}: not JSON ({exc})") from None
    report = report_from_dict(data, where=where)
    trace_id = data.get("trace_id") if isinstance(data, dict) else None
    return report, trace_id if isinstance(trace_id, str) else None


def report_from_dict(data: object, where: str = "the report") -> ReplayReport:
    """A :class:`~chronicle_otel.replaying.ReplayReport` from its JSON form, every field checked.

    The form is the one ``dataclasses.asdict(report)`` gives (call keys as lists of ``[name, index]``); other
    keys (``ok``, ``trace_id``) are ignored.

    Args:
        data: the parsed JSON.
        where: names the source in error messages.

    Returns:
        The report.

    Raises:
        ChronicleError: ``data`` is not a report.
    """
    if not isinstance(data, dict):
        raise ChronicleError(f"{where}: expected a JSON object (a replay report), got {type(data).__name__}")
    findings: dict[str, list[Finding]] = {}
    for name, _ in SECTIONS:
        items = data.get(name, [])
        if not isinstance(items, list):
            raise ChronicleError(f"{where}: {name} must be a list of findings")
        findings[name] = [_finding(item, f"{where}: {name}[{i}]") for i, item in enumerate(items)]
    keys: dict[str, list[tuple[tuple[str, int], ...]]] = {}
    for name in ("stubbed", "live", "live_llm"):
        items = data.get(name, [])
        if not isinstance(items, list):
            raise ChronicleError(f"{where}: {name} must be a list of call keys")
        keys[name] = [_call_key(item, f"{where}: {name}[{i}]") for i, item in enumerate(items)]
    strict = data.get("strict", False)
    if not isinstance(strict, bool):
        raise ChronicleError(f"{where}: strict must be true or false")
    ignored = data.get("ignored", 0)
    if not isinstance(ignored, int) or isinstance(ignored, bool) or ignored < 0:
        raise ChronicleError(f"{where}: ignored must be a count")
    return ReplayReport(
        divergences=findings["divergences"],
        drift=findings["drift"],
        changes=findings["changes"],
        intended=findings["intended"],
        ignored=ignored,
        overrides=findings["overrides"],
        session=findings["session"],
        stubbed=keys["stubbed"],
        live=keys["live"],
        live_llm=keys["live_llm"],
        strict=strict,
    )


def _finding(item: object, where: str) -> Finding:
    if not isinstance(item, dict):
        raise ChronicleError(f"{where}: expected an object with kind, call_key, message and details")
    kind, message, details = item.get("kind"), item.get("message", ""), item.get("details", [])
    if not isinstance(kind, str) or not isinstance(message, str):
        raise ChronicleError(f"{where}: kind and message must be strings")
    if not isinstance(details, list) or not all(isinstance(d, str) for d in details):
        raise ChronicleError(f"{where}: details must be a list of strings")
    call_key = _call_key(item.get("call_key", []), where)
    try:
        known = FindingKind(kind)
    except ValueError:
        raise ChronicleError(f"{where}: unknown kind {kind!r} (a FindingKind: {', '.join(FindingKind)})") from None
    cause, change, strict = item.get("cause"), item.get("change"), item.get("strict", False)
    try:
        known_cause = DriftCause(cause) if cause is not None else None
    except ValueError:
        raise ChronicleError(f"{where}: unknown cause {cause!r} (a DriftCause: {', '.join(DriftCause)})") from None
    if change is not None and not isinstance(change, str):
        raise ChronicleError(f"{where}: change must be a string or null")
    if not isinstance(strict, bool):
        raise ChronicleError(f"{where}: strict must be true or false")
    return Finding(known, call_key, message, tuple(details), known_cause, change, strict)


def _call_key(item: object, where: str) -> tuple[tuple[str, int], ...]:
    if not isinstance(item, list):
        raise ChronicleError(f"{where}: a call key is a list of [name, index] pairs")
    key = []
    for part in item:
        if (
            not isinstance(part, list)
            or len(part) != 2
            or not isinstance(part[0], str)
            or not isinstance(part[1], int)
            or isinstance(part[1], bool)
        ):
            raise ChronicleError(f"{where}: a call key is a list of [name, index] pairs, got {_short(part)}")
        key.append((part[0], part[1]))
    return tuple(key)


def _short(value: object) -> str:
    text = json.dumps(value, default=str)
    return text if len(text) <= 60 else text[:59] + "…"
