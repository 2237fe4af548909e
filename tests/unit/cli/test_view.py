from __future__ import annotations

import argparse
import base64
import contextlib
import dataclasses
import datetime as dt
import decimal
import enum
import hashlib
import io
import json
import re
import uuid
from pathlib import Path
from typing import Any

import pydantic
import pytest

import chronicle_otel as chronicle
from chronicle_otel import semconv as sc
from chronicle_otel.cli import _view
from chronicle_otel.cli._view import _data, _readable, _report
from chronicle_otel.errors import ChronicleError
from chronicle_otel.replaying import Finding, ReplayReport, SpanRecord, build_trace
from chronicle_otel.replaying import Trace as TraceModel
from tests.conftest import Recorder

HOSTILE = "<img src=x onerror=alert(1)>"
BREAKOUT = "</script><script>alert(2)</script><!--"
TID = "ab" * 16


class Intent(pydantic.BaseModel):
    category: str
    confidence: float


class Color(enum.Enum):
    RED = "red"


@dataclasses.dataclass
class Refund:
    amount: decimal.Decimal
    when: dt.date
    refunded: bool


@chronicle.boundary(kind="llm", name="view.classify")
def classify(text: str) -> Intent:
    return Intent(category="refund", confidence=0.75)


@chronicle.boundary(kind="retrieval", name="view.retrieve")
def retrieve(query: str) -> Any:
    for i in range(2):
        yield {"doc": i, "text": f"doc {i} about {query}"}


@chronicle.boundary(kind="tool", name="view.refund")
def refund(amount: decimal.Decimal) -> Refund:
    raise ValueError("card declined")


@chronicle.boundary(kind="agent", name="view.agent")
def agent(text: str) -> Refund:
    classify(text)
    list(retrieve(text))
    with contextlib.suppress(ValueError):
        refund(decimal.Decimal("49.99"))
    return Refund(decimal.Decimal("49.99"), dt.date(2024, 1, 2), True)


def recorded(recorder: Recorder) -> TraceModel:
    with chronicle.session(tenant="acme"):
        agent("money back")
    recorder.config.force_flush()
    return chronicle.load_trace(recorder.path, "latest")


def span(
    i: int,
    parent: int | None,
    name: str,
    *,
    start: int = 0,
    end: int = 10,
    output: str | None = "1",
    input: str = "{}",
    index: int = 0,
    extra: dict[str, Any] | None = None,
) -> SpanRecord:
    attrs: dict[str, Any] = {
        sc.BOUNDARY_NAME: name,
        sc.BOUNDARY_KIND: "tool",
        sc.CODEC: "chronicle-json/1",
        sc.CALL_INDEX: index,
        sc.INPUT: input,
    }
    if output is not None:
        attrs[sc.OUTPUT] = output
    attrs.update(extra or {})
    return SpanRecord(TID, f"{i:016x}", None if parent is None else f"{parent:016x}", name, 1, start, end, attrs)


def synthetic(*spans: SpanRecord) -> TraceModel:
    return build_trace(TID, list(spans), source="test")


def readable_of(value: Any, head: str = "", *, error: bool = False) -> str:
    return _readable.readable_text(value, head, error=error, limit=_data.MAX_PAYLOAD_CHARS)


def page_data(page: str) -> dict[str, Any]:
    match = re.search(r'<script type="application/json" id="chronicle-data">(.*?)</script>', page, re.S)
    assert match is not None
    data: dict[str, Any] = json.loads(match.group(1))
    return data


def inline(page: str, tag: str) -> str:
    match = re.search(rf"<{tag}>(.*?)</{tag}>", page, re.S)
    assert match is not None
    return match.group(1)


# --- escaping and the page's policy -----------------------------------------------------------------------------


def test_hostile_names_and_values_never_leave_the_json_block() -> None:
    hostile = synthetic(
        span(1, None, HOSTILE, end=100, input=json.dumps({"x": BREAKOUT}), output=json.dumps(HOSTILE + "&amp;")),
        span(2, 1, BREAKOUT, start=10, end=20, output=json.dumps("line\u2028sep\u2029end")),
        span(3, 1, "s", start=20, end=30, extra={f"{sc.SESSION_PREFIX}user": "</script>"}),
    )
    page = _view.render_html(hostile)
    assert page.count("<script") == 2 and page.count("</script>") == 2  # the data block and the code, nothing else
    assert HOSTILE not in page and "<img" not in page and "<!--" not in page and "&amp;" not in page
    assert "\u2028" not in page and "\u2029" not in page
    block = re.search(r'id="chronicle-data">(.*?)</script>', page, re.S)
    assert block is not None and not set("<>&") & set(block.group(1))
    data = page_data(page)  # the escapes decode back to the exact strings
    names = [b["name"] for b in data["boundaries"]]
    assert names == [HOSTILE, BREAKOUT, "s"]
    assert data["boundaries"][0]["output"]["readable"] == repr(HOSTILE + "&amp;")
    assert BREAKOUT in data["boundaries"][0]["input"]["json"]
    assert data["boundaries"][1]["output"]["json"] == json.dumps("line\u2028sep\u2029end", ensure_ascii=False)
    assert data["boundaries"][2]["session"] == [["user", "</script>"]]
    assert data["trace"]["root"] == HOSTILE
    assert "<title>chronicle · &lt;img src=x onerror=alert(1)&gt;" in page


def test_lone_surrogates_and_control_characters_still_make_a_utf8_page() -> None:
    page = _view.render_html(
        synthetic(span(1, None, "bad\ud800\x1b[2Jname", output='"\\ud800"', input='{"x": "\ud800"}'))
    )
    page.encode("utf-8")  # writable as the page's declared charset
    (root,) = page_data(page)["boundaries"]
    assert root["name"] == "bad\ud800\x1b[2Jname"
    assert "<title>chronicle · bad??[2Jname · abababab</title>" in page
    assert "not valid JSON: shown as recorded" in root["input"]["note"]


def test_the_policy_allows_only_the_inline_style_and_script_by_hash() -> None:
    page = _view.render_html(synthetic(span(1, None, "root")))
    policy = re.search(r'<meta http-equiv="Content-Security-Policy" content="([^"]*)">', page)
    assert policy is not None
    directives = dict(d.strip().split(" ", 1) for d in policy.group(1).split(";"))
    assert directives["default-src"] == "'none'"
    for tag, directive in (("style", "style-src"), ("script", "script-src")):
        digest = base64.b64encode(hashlib.sha256(inline(page, tag).encode()).digest()).decode()
        assert directives[directive] == f"'sha256-{digest}'"
    assert "unsafe" not in policy.group(1)
    assert directives["require-trusted-types-for"] == "'script'" and directives["trusted-types"] == "'none'"
    assert directives["base-uri"] == "'none'" and directives["form-action"] == "'none'"


def test_the_page_loads_nothing_and_its_script_writes_no_markup() -> None:
    page = _view.render_html(synthetic(span(1, None, "root")))
    assert not re.search(r"https?:|//[a-z]|@import|url\(", page, re.I)  # no CDN, no font, no remote anything
    assert re.findall(r'(?:src|href)="([^"]*)"', page) == ["data:,"]  # the empty favicon
    script = inline(page, "script")
    for sink in ("innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval(", "Function(", "srcdoc"):
        assert sink not in script
    assert "textContent" in script


# --- the data of the page ---------------------------------------------------------------------------------------


def test_a_recorded_trace_becomes_tree_timeline_session_and_payload_views(recorder: Recorder) -> None:
    trace = recorded(recorder)
    data = page_data(_view.render_html(trace))
    by_name = {b["name"]: b for b in data["boundaries"]}
    assert list(by_name) == ["view.agent", "view.classify", "view.retrieve", "view.refund"]
    assert [b["parent"] for b in data["boundaries"]] == [-1, 0, 0, 0]
    starts = [b["start"] for b in data["boundaries"]]
    assert starts[0] == 0 and starts == sorted(starts)
    assert all(b["end"] >= b["start"] for b in data["boundaries"])
    assert data["trace"]["session"] == [["tenant", "acme"]] and by_name["view.classify"]["session"] is None
    assert data["trace"]["errors"] == 1 and data["trace"]["status"] == "OK"
    assert by_name["view.refund"]["status"] == "ERROR" and by_name["view.agent"]["status"] == "OK"
    assert by_name["view.classify"]["input"]["readable"] == "classify(text='money back')"
    assert by_name["view.classify"]["output"]["readable"] == "Intent(category='refund', confidence=0.75)"
    assert by_name["view.classify"]["output"]["typed"] is True
    assert '"$type": "pydantic"' in by_name["view.classify"]["output"]["json"]
    assert by_name["view.agent"]["output"]["readable"] == (
        "Refund(amount=Decimal('49.99'), refunded=True, when=date('2024-01-02'))"
    )
    retrieve_ = by_name["view.retrieve"]
    assert retrieve_["stream"] and retrieve_["stream_state"] == "complete"
    assert "doc 1 about money back" in retrieve_["output"]["readable"]
    error = by_name["view.refund"]
    assert error["error"]["readable"] == "ValueError('card declined')"
    assert "Traceback" in error["stack"] and "card declined" in error["stack"]
    assert error["output"] is None and data["report"] is None


@pytest.mark.parametrize(
    ("value", "readable"),
    [
        ({"$type": "enum", "class": "m.Color", "name": "RED", "value": "red"}, "Color.RED"),
        ({"$type": "decimal", "value": "1.10"}, "Decimal('1.10')"),
        ({"$type": "uuid", "value": str(uuid.UUID(int=1))}, f"UUID('{uuid.UUID(int=1)}')"),
        (
            {"$type": "datetime", "iso": "2024-01-02T03:04:05", "tz": "Europe/Paris"},
            "datetime('2024-01-02T03:04:05', tz='Europe/Paris')",
        ),
        ({"$type": "timedelta", "days": 1, "seconds": 0, "microseconds": 5}, "timedelta(days=1, microseconds=5)"),
        ({"$type": "tuple", "items": [1]}, "(1,)"),
        ({"$type": "set", "items": []}, "set()"),
        ({"$type": "frozenset", "items": ["a"]}, "frozenset({'a'})"),
        ({"$type": "bytes", "b64": base64.b64encode(b"\x00hi").decode()}, "b'\\x00hi'"),
        ({"$type": "bytes", "b64": "!!"}, "bytes(b64='!!')"),
        ({"$type": "int", "value": "123456789012345678901234567890"}, "123456789012345678901234567890"),
        ({"$type": "float", "value": "nan"}, "float('nan')"),
        ({"$type": "path", "value": "/tmp/x", "pure": False}, "Path('/tmp/x')"),
        (
            {"$type": "dict", "items": [[1, "one"], [{"$type": "tuple", "items": [1, 2]}, "pair"]]},
            "{1: 'one', (1, 2): 'pair'}",
        ),
        (
            {"$type": "unencodable", "class": "socket.socket", "repr": "<socket>"},
            "<unencodable socket.socket: <socket>>",
        ),
        ({"$type": "exception", "class": "builtins.KeyError", "message": "'k'", "args": ["k"]}, "KeyError('k')"),
        ({"$type": "dataclass", "class": "m.<locals>.P", "data": {"x": 1}}, "P(x=1)"),
        ({"$type": "dataclass", "class": "m.not a name", "data": {"not id": 1}}, "<m.not a name>('not id'=1)"),
        ({"$type": "no-such-tag", "x": 1}, "{'$type': 'no-such-tag', 'x': 1}"),
    ],
)
def test_typed_values_read_as_python_shows_them(value: Any, readable: str) -> None:
    assert readable_of(value) == readable


def test_long_values_break_over_lines_and_texts_keep_their_line_breaks() -> None:
    value = {
        "$type": "pydantic",
        "class": "app.Reply",
        "data": {"messages": [{"role": "user", "content": "line one\nline two\nline three, a longer one"}] * 2},
    }
    text = readable_of(value)
    assert text.splitlines()[0] == "Reply("
    assert '"""line one\nline two\nline three, a longer one"""' in text
    assert text.endswith(")")
    assert readable_of("a\x1b[31m\nb" * 10).count("\\x1b") == 10  # terminal escapes shown, not kept


def test_an_error_payload_reads_as_the_exception_with_its_attributes() -> None:
    error = {"type": "app.errors.Declined", "message": "no", "args": ["no"], "attrs": {"code": 402}}
    assert readable_of(error, error=True) == "Declined('no', code=402)"


def test_deep_and_huge_values_are_bounded() -> None:
    deep: Any = "x"
    for _ in range(1000):
        deep = [deep]
    text = readable_of(deep)
    assert "…" in text and text.count("[") == _readable.MAX_DEPTH + 1
    wide = list(range(300_000))
    assert len(readable_of(wide)) <= _data.MAX_PAYLOAD_CHARS + 1


# --- bounds ------------------------------------------------------------------------------------------------------


def test_a_payload_over_the_cap_is_cut_with_a_note() -> None:
    big = json.dumps({"text": "y" * (_data.MAX_PAYLOAD_CHARS + 10)})
    data = page_data(_view.render_html(synthetic(span(1, None, "root", output=big))))
    output = data["boundaries"][0]["output"]
    assert output["cut"] and "cut at 256 K characters" in output["note"]
    assert len(output["json"]) == _data.MAX_PAYLOAD_CHARS and len(output["readable"]) == _data.MAX_PAYLOAD_CHARS
    assert output["size"] == len(big)


def test_boundaries_over_the_cap_are_left_out_and_said(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_data, "MAX_BOUNDARIES", 3)
    spans = [span(1, None, "root", end=1000)] + [
        span(i, 1, "child", index=i - 2, start=i * 10, end=i * 10 + 5) for i in range(2, 10)
    ]
    page = _view.render_html(synthetic(*spans))
    data = page_data(page)
    assert len(data["boundaries"]) == 3
    assert data["trace"]["boundaries"] == 9 and data["trace"]["shown"] == 3
    assert "only the first" in inline(page, "script")  # the note the page shows


def test_the_page_budget_leaves_later_payloads_out(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_data, "MAX_PAGE_PAYLOAD_CHARS", 50)
    spans = [span(1, None, "root", end=100, output=json.dumps("z" * 60))]
    spans.append(span(2, 1, "late", start=10, end=20, output=json.dumps("late output")))
    data = page_data(_view.render_html(synthetic(*spans)))
    assert "z" * 60 in data["boundaries"][0]["output"]["json"]
    late = data["boundaries"][1]["output"]
    assert late["json"] == "" and "not embedded" in late["note"] and data["limits"]["budget_spent"]


def test_incomplete_and_invalid_payloads_are_shown_as_recorded() -> None:
    spans = [
        span(
            1,
            None,
            "root",
            output='{"cut": "abc',
            extra={sc.OUTPUT_HASH: "sha256:" + "0" * 64, sc.OUTPUT_TRUNCATED: True},
        ),
        span(2, 1, "bad", start=1, end=2, output="{not json"),
    ]
    data = page_data(_view.render_html(synthetic(*spans)))
    cut, bad = data["boundaries"][0]["output"], data["boundaries"][1]["output"]
    assert cut["json"] == '{"cut": "abc' and cut["readable"] is None and "incomplete" in cut["note"]
    assert bad["json"] == "{not json" and bad["readable"] is None and "not valid JSON" in bad["note"]


def test_an_empty_trace_still_renders() -> None:
    empty = TraceModel(TID, (), (), None)
    data = page_data(_view.render_html(empty))
    assert data["boundaries"] == [] and data["trace"]["root"] == ""


# --- the replay report ------------------------------------------------------------------------------------------


def report_for(trace: TraceModel) -> ReplayReport:
    classify_key = trace.find("view.classify")[0].call_key
    return ReplayReport(
        divergences=[Finding("unused-recording", classify_key, "never called", ("recorded input: {}",))],
        changes=[Finding("output-changed", trace.boundaries[0].call_key, "the output changed", ("$.x: 1 != 2",))],
        drift=[Finding("input-drift", (("nowhere", 0),), HOSTILE)],
        stubbed=[classify_key],
        live=[trace.boundaries[0].call_key],
    )


def test_the_replay_report_names_its_boundaries(recorder: Recorder) -> None:
    trace = recorded(recorder)
    data = page_data(_view.render_html(trace, report_for(trace)))
    report = data["report"]
    assert report["ok"] is False and report["summary"].startswith("replay FAILED")
    sections = {s["name"]: s for s in report["sections"]}
    (unused,) = sections["divergences"]["findings"]
    assert data["boundaries"][unused["boundary"]]["name"] == "view.classify"
    assert unused["key"] == "view.agent[0] > view.classify[0]" and unused["details"] == ["recorded input: {}"]
    assert sections["changes"]["findings"][0]["boundary"] == 0
    assert sections["drift"]["findings"][0]["boundary"] == -1  # no such call: listed, linked to nothing
    assert report["stubbed"] == [1] and report["live"] == [0]


def test_a_report_round_trips_through_json(tmp_path: Path, recorder: Recorder) -> None:
    trace = recorded(recorder)
    report = report_for(trace)
    path = tmp_path / "report.json"
    path.write_text(json.dumps(dataclasses.asdict(report)))
    assert _report.load_report(path) == report


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ([], "expected a JSON object"),
        ({"divergences": {}}, "divergences must be a list"),
        ({"drift": [{"kind": 1, "message": "m"}]}, "kind and message must be strings"),
        ({"changes": [{"kind": "k", "call_key": [["a", "0"]]}]}, "a call key is a list of [name, index] pairs"),
        ({"changes": [{"kind": "k", "details": [1]}]}, "details must be a list of strings"),
        ({"live": [[["a", True]]]}, "a call key"),
        ({"strict": "yes"}, "strict must be true or false"),
    ],
)
def test_a_malformed_report_is_a_clear_error(data: Any, message: str) -> None:
    with pytest.raises(ChronicleError, match=re.escape(message)):
        _report.report_from_dict(data)


def test_an_unreadable_report_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(ChronicleError, match=r"--report .*missing\.json"):
        _report.load_report(tmp_path / "missing.json")
    (tmp_path / "bad.json").write_text("{")
    with pytest.raises(ChronicleError, match="not JSON"):
        _report.load_report(tmp_path / "bad.json")


# --- the command ------------------------------------------------------------------------------------------------


def parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="chronicle")
    _view.add_parser(parser.add_subparsers(dest="command"))
    return parser.parse_args([_view.NAME, *argv])


def view(*argv: str) -> Path:
    out = io.StringIO()
    assert _view.run(parse(*argv), out) == 0
    return Path(out.getvalue().strip())


def test_view_writes_the_page_here_by_default_and_prints_its_path(
    recorder: Recorder, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    trace = recorded(recorder)
    monkeypatch.chdir(tmp_path)
    opened: list[str] = []

    def fake_open(url: str) -> bool:
        opened.append(url)
        return True

    monkeypatch.setattr("webbrowser.open", fake_open)
    path = view(trace.trace_id[:6], "--store", str(recorder.path))  # a unique prefix is enough
    assert path == Path(f"chronicle-{trace.trace_id[:8]}.html") and (tmp_path / path).is_file()
    assert opened == []
    (tmp_path / "pages").mkdir()
    written = view("latest", "--store", str(recorder.path), "--out", str(tmp_path / "pages"), "--open")
    assert written == tmp_path / "pages" / f"chronicle-{trace.trace_id[:8]}.html"
    assert opened == [written.resolve().as_uri()]
    assert page_data(written.read_text(encoding="utf-8"))["trace"]["id"] == trace.trace_id


def test_view_reads_a_trace_file(recorder: Recorder, tmp_path: Path) -> None:
    trace = recorded(recorder)
    file = chronicle.write_trace(trace, tmp_path / "incident.jsonl")
    page = view(trace.trace_id, "--file", str(file), "--out", str(tmp_path / "incident.html"))
    data = page_data(page.read_text(encoding="utf-8"))
    assert [b["name"] for b in data["boundaries"]] == [b.name for b in trace.boundaries]


def test_view_says_when_no_browser_opens_the_page(
    recorder: Recorder, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    recorded(recorder)
    monkeypatch.setattr("webbrowser.open", lambda url: False)
    page = view("latest", "--store", str(recorder.path), "--out", str(tmp_path / "page.html"), "--open")
    assert page.is_file()
    assert f"no web browser found; open {page.resolve().as_uri()} yourself" in capsys.readouterr().err


def test_view_shows_a_report_file_and_warns_when_it_is_of_another_trace(
    recorder: Recorder, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    trace = recorded(recorder)
    report = tmp_path / "report.json"
    report.write_text(json.dumps({**dataclasses.asdict(report_for(trace)), "trace_id": "cd" * 16}))
    page = view("latest", "--store", str(recorder.path), "--out", str(tmp_path / "p.html"), "--report", str(report))
    assert page_data(page.read_text(encoding="utf-8"))["report"]["sections"][0]["count"] == 1
    assert f"is of trace {'cd' * 16}, not {trace.trace_id}" in capsys.readouterr().err


def test_view_errors_are_chronicle_errors_and_write_nothing(recorder: Recorder, tmp_path: Path) -> None:
    recorded(recorder)
    store = str(recorder.path)
    (tmp_path / "file").write_text("")
    with pytest.raises(ChronicleError, match="cannot write the page"):
        view("latest", "--store", store, "--out", str(tmp_path / "file" / "page.html"))
    with pytest.raises(ChronicleError, match="--report"):
        view("latest", "--store", store, "--out", str(tmp_path / "x.html"), "--report", str(tmp_path / "none.json"))
    with pytest.raises(ChronicleError):
        view("0" * 32, "--store", store, "--out", str(tmp_path / "x.html"))
    assert not (tmp_path / "x.html").exists()


def test_the_parser_takes_the_load_options() -> None:
    args = parse("0" * 32, "--file", "t.jsonl", "--payloads", "s3://b/p", "--out", "x.html", "--open")
    assert (args.trace_id, args.file, args.payloads, args.out, args.open, args.report, args.store) == (
        "0" * 32,
        "t.jsonl",
        "s3://b/p",
        "x.html",
        True,
        None,
        None,
    )
