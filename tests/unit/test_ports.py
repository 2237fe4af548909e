"""The test servers' ports: outside the kernel's ephemeral range, distinct, free, and per-worker."""

from __future__ import annotations

import socket

import pytest

from tests import ports


def test_ports_are_distinct_free_and_below_the_ephemeral_range() -> None:
    chosen = ports.free_ports(8)
    assert len(set(chosen)) == 8
    floor = ports._ephemeral_floor()
    for port in chosen:
        assert ports.LOW <= port < floor
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", port))  # still free once handed out


def test_each_worker_draws_from_its_own_slice(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PYTEST_XDIST_WORKER_COUNT", "4")
    slices = []
    for index in range(4):
        monkeypatch.setenv("PYTEST_XDIST_WORKER", f"gw{index}")
        slices.append(set(ports._worker_slice()))
        assert set(ports.free_ports(4)) <= slices[-1]
    for i, a in enumerate(slices):
        for b in slices[i + 1 :]:
            assert not a & b


def test_a_taken_port_is_never_handed_out(monkeypatch: pytest.MonkeyPatch) -> None:
    three = sorted(ports.free_ports(3))
    monkeypatch.setattr(ports, "_worker_slice", lambda: three)
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", three[1]))
        taken.listen()
        assert sorted(ports.free_ports(2)) == [three[0], three[2]]
        with pytest.raises(OSError, match="no 3 free ports"):
            ports.free_ports(3)
