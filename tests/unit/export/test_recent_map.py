"""The exporter's bounded memories of traces: what they remember, what they forget, and that they stay bounded."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from chronicle_otel import ChronicleExporter, LocalStore
from chronicle_otel.export._recent import RecentMap

# put(key, size) / update(key, size) / pop(key); values are sets of ``size`` distinct ints, weighed by len
_OPS = st.lists(
    st.tuples(st.sampled_from(["put", "update", "pop"]), st.integers(0, 40), st.integers(1, 9)),
    max_size=400,
)


@settings(max_examples=300, deadline=None)
@given(capacity=st.integers(2, 60), ops=_OPS)
def test_a_key_is_remembered_with_its_last_value_until_half_the_capacity_was_written_after_it(
    capacity: int, ops: list[tuple[str, int, int]]
) -> None:
    recent: RecentMap[int, frozenset[int]] = RecentMap(capacity, len)
    latest: dict[int, frozenset[int]] = {}  # the model: each key's last value, and the weight written after it
    after: dict[int, int] = {}
    counter = 0
    for op, key, size in ops:
        present = key in recent
        if op == "pop":
            assert recent.pop(key) == (latest[key] if present else None)
            assert key not in recent
            latest.pop(key, None)
            after.pop(key, None)
            continue
        value = frozenset(range(counter, counter + size))
        counter += size
        if op == "put":
            recent.put(key, value)
        else:
            recent.update(key, lambda old, value=value: value if old is None else old | value)
            if present:
                value = latest[key] | value
        for other in after:
            after[other] += len(value)
        latest[key] = value
        after[key] = 0
        assert recent.get(key) == value
        held = {k: v for k, v in latest.items() if k in recent}
        assert recent.weight == sum(len(v) for v in held.values())
        assert len(recent) == len(held)
        # bounded: below half in the newer generation, the older one at most half plus one value
        assert recent.weight < capacity + 2 * 40
        for other, written in after.items():
            if written < capacity // 2:
                assert recent.get(other) == latest[other], (other, written)
        for forgotten in latest.keys() - held.keys():
            assert recent.get(forgotten) is None
            assert after[forgotten] >= capacity // 2


def test_update_changes_the_weight_of_a_value_changed_in_place() -> None:
    recent: RecentMap[str, set[int]] = RecentMap(100, len)
    recent.put("a", {1})

    def grow(old: set[int] | None) -> set[int]:
        assert old is not None
        old |= {2, 3}
        return old

    recent.update("a", grow)
    assert recent.get("a") == {1, 2, 3}
    assert recent.weight == 3
    assert recent.pop("a") == {1, 2, 3}
    assert recent.weight == 0
    assert len(recent) == 0


def test_a_rewritten_key_survives_rotations_the_others_do_not() -> None:
    recent: RecentMap[int, bool] = RecentMap(10)
    for key in range(1000):
        recent.put(key, True)
        recent.put(-1, True)  # written again after every other key
        assert len(recent) <= 11
    assert -1 in recent
    assert 0 not in recent
    assert all(key in recent for key in range(996, 1000))


def test_the_exporter_remembers_the_last_kept_traces_and_no_more(tmp_path: Path) -> None:
    exporter = ChronicleExporter(LocalStore(tmp_path, durable=False))
    payloads: list[tuple[str, bytes]] = []
    for trace_id in range(1, 250_001):
        exporter._release(trace_id, payloads, [])
    kept = exporter._kept
    assert 50_000 <= len(kept) <= 100_000
    assert all(trace_id in kept for trace_id in range(200_001, 250_001))
    assert 1 not in kept
    exporter.shutdown()


def test_capacity_below_two_is_refused() -> None:
    with pytest.raises(ValueError, match="at least 2"):
        RecentMap(1)
