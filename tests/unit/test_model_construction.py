"""The records loading makes without the generated ``__init__`` are the frozen dataclasses ``__init__`` would make."""

from __future__ import annotations

import dataclasses
import pickle
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from chronicle_otel.model import (
    Boundary,
    Payload,
    SpanRecord,
    _boundary_record,
    _payload,
    _span_record,
)

TID = "5b8efff798038103d269b633813fc60c"

_span_fields = st.fixed_dictionaries(
    {
        "trace_id": st.just(TID),
        "span_id": st.text(min_size=1, max_size=16),
        "parent_span_id": st.one_of(st.none(), st.text(max_size=16)),
        "name": st.text(max_size=10),
        "kind": st.integers(min_value=0, max_value=5),
        "start_ns": st.integers(min_value=0, max_value=2**64 - 1),
        "end_ns": st.integers(min_value=0, max_value=2**64 - 1),
        "attributes": st.dictionaries(st.text(max_size=5), st.one_of(st.integers(), st.text(max_size=5)), max_size=4),
        "status": st.sampled_from(["UNSET", "OK", "ERROR"]),
        "status_message": st.text(max_size=5),
        "events": st.just(()),
        "links": st.just(()),
        "resource": st.just({"service.name": "svc"}),
        "scope": st.text(max_size=5),
        "trace_state": st.text(max_size=5),
        "flags": st.integers(min_value=0, max_value=0xFFFFFFFF),
        "origin": st.text(max_size=10),
    }
)


@settings(max_examples=100, deadline=None)
@given(_span_fields)
def test_a_span_record_made_for_loading_is_the_one_init_makes(fields: dict[str, Any]) -> None:
    made = _span_record(*(fields[f.name] for f in dataclasses.fields(SpanRecord)))
    built = SpanRecord(**fields)
    assert type(made) is SpanRecord
    assert made == built and repr(made) == repr(built)
    assert {f.name: getattr(made, f.name) for f in dataclasses.fields(made)} == fields
    assert dataclasses.replace(made, name="other") == dataclasses.replace(built, name="other")


def _boundary(**changes: Any) -> Boundary:
    span = _span_record(TID, "00000000000000a1", None, "n", 1, 1, 2, {}, "OK", "", (), (), {}, "", "", 0, "f:1")
    fields: dict[str, Any] = {
        "name": "n",
        "kind": "llm",
        "call_index": 0,
        "call_key": (("n", 0),),
        "span_id": "00000000000000a1",
        "parent": None,
        "session": {},
        "start_ns": 1,
        "end_ns": 2,
        "status": "OK",
        "stream": False,
        "stream_state": None,
        "function": None,
        "raw_input": _payload('{"q": 1}', None, "unverified"),
        "raw_output": None,
        "raw_error": None,
        "span": span,
        "allow": None,
    }
    fields.update(changes)
    return _boundary_record(*fields.values())


def test_records_made_for_loading_are_frozen_and_have_no_instance_dict() -> None:
    span = _span_record(TID, "00000000000000a1", None, "n", 1, 1, 2, {}, "OK", "", (), (), {}, "", "", 0, "")
    payload = _payload("[]", None, "unverified")
    boundary = _boundary()
    for record, field in ((span, "name"), (payload, "text"), (boundary, "name")):
        with pytest.raises(dataclasses.FrozenInstanceError):
            setattr(record, field, "changed")
        assert not hasattr(record, "__dict__")
    assert type(payload) is Payload and payload == Payload("[]", None, "unverified")
    assert type(boundary) is Boundary


def test_a_boundary_made_for_loading_equals_one_built_field_by_field() -> None:
    made = _boundary()
    built = Boundary(**{f.name: getattr(made, f.name) for f in dataclasses.fields(made) if f.init})
    assert repr(made) == repr(built)
    assert [getattr(made, f.name) for f in dataclasses.fields(made)] == [
        getattr(built, f.name) for f in dataclasses.fields(built)
    ]
    assert made.input == built.input == {"q": 1}


def test_a_boundary_decodes_once_per_allow_list_and_copies_without_its_cache() -> None:
    boundary = _boundary()
    first = boundary.input
    assert boundary.input is first  # kept
    assert boundary.decode_input(allow=()) == first and boundary.decode_input(allow=()) is not first  # decoded again
    again = dataclasses.replace(boundary, call_index=1)
    assert again.input == first and again.input is not first  # a copy starts without the decoded values
    assert "_decoded" not in repr(boundary)


def test_records_made_for_loading_pickle_like_the_others() -> None:
    span = _span_record(
        TID, "00000000000000a1", "00000000000000a0", "n", 1, 1, 2, {"k": 1}, "OK", "", (), (), {}, "", "", 0, "o"
    )
    assert pickle.loads(pickle.dumps(span)) == span
    payload = _payload("[]", "sha256:" + "0" * 64, "ok")
    assert pickle.loads(pickle.dumps(payload)) == payload
