"""The pytest plugin keeps a replay from reaching a model: the network guard, checked selectors, strict drift and
what-if overrides, each as a test failure rather than a silent pass."""

from __future__ import annotations

import socket
import sys
import textwrap
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

import chronicle_otel as chronicle

AGENT = textwrap.dedent(
    """
    import os
    import socket
    import chronicle_otel as chronicle

    CALLS = {"llm": 0}

    @chronicle.boundary(kind="llm", name="net.plan")
    def plan(request):
        CALLS["llm"] += 1
        target = os.environ.get("NET_AGENT_MODEL", "")
        if target:  # the "model": a TCP service
            host, port = target.rsplit(":", 1)
            with socket.create_connection((host, int(port)), timeout=2) as conn:
                conn.sendall(b"plan")
        return {"qty": 1000}

    @chronicle.boundary(kind="tool", name="net.order")
    def order(plan, limit):
        return "blocked" if plan["qty"] > limit else "filled"

    @chronicle.boundary(kind="agent", name="net.run")
    def run(request, limit=10_000):
        return order(plan(request), limit)
    """
)


class Listener:
    """A TCP listener on 127.0.0.1 that counts the connections it accepts."""

    def __init__(self) -> None:
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.sock.settimeout(0.2)
        self.port = self.sock.getsockname()[1]
        self.accepted = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except (TimeoutError, OSError):
                continue
            self.accepted += 1
            conn.close()

    def close(self) -> None:
        self._stop.set()
        self._thread.join(5)
        self.sock.close()


@pytest.fixture
def listener() -> Iterator[Listener]:
    server = Listener()
    yield server
    server.close()


@pytest.fixture
def project(pytester: pytest.Pytester, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    """A pytester project with the agent module and its recorded trace under traces/."""
    monkeypatch.delenv("NET_AGENT_MODEL", raising=False)
    pytester.makepyfile(netagent=AGENT)
    pytester.syspathinsert()
    pytester.makeini("[pytest]\nasyncio_default_fixture_loop_scope = function\n")
    sys.modules.pop("netagent", None)
    import netagent  # type: ignore[import-not-found]
    from opentelemetry.sdk.trace import TracerProvider

    config = chronicle.configure(
        store=chronicle.StoreOptions(path=tmp_path / "store", processor="simple"),
        tracer_provider=TracerProvider(),
        session={"build_id": "b1"},
    )
    assert config.store is not None
    netagent.run("sell $1,000")
    (pytester.path / "traces").mkdir()
    chronicle.write_trace(chronicle.load_trace(config.store, "latest"), pytester.path / "traces" / "run.jsonl")
    return pytester


def test_a_live_llm_connection_is_refused_and_fails_the_test(
    project: pytest.Pytester, listener: Listener, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("NET_AGENT_MODEL", f"127.0.0.1:{listener.port}")
    project.makepyfile(
        test_inner="""
        import pytest

        @pytest.mark.chronicle_replay("traces/run.jsonl", stub=(), live={"kind:llm"}, allow_hosts=())
        def test_live_model(chronicle_replay):
            chronicle_replay.rerun()
        """
    )
    result = project.runpytest("-p", "no:cacheprovider")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "*NetworkBlockedError: replay blocked the lookup of 127.0.0.1"
            " during boundary net.run[[]0[]] > net.plan[[]0[]] (llm)*"
        ]
    )
    assert listener.accepted == 0


def test_a_swallowed_refusal_still_fails_the_test(
    project: pytest.Pytester, listener: Listener, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("NET_AGENT_MODEL", f"127.0.0.1:{listener.port}")
    project.makepyfile(
        test_inner="""
        import pytest

        @pytest.mark.chronicle_replay("traces/run.jsonl", stub=(), live={"kind:llm"}, allow_hosts=())
        def test_swallowing(chronicle_replay):
            try:
                chronicle_replay.rerun()
            except Exception:
                pass  # a client that retries and gives up quietly
        """
    )
    result = project.runpytest("-p", "no:cacheprovider")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*[[]network[]] net.run[[]0[]] > net.plan[[]0[]]: network lookup of 127.0.0.1*"])
    assert listener.accepted == 0


def test_a_lookup_of_a_reserved_name_is_refused_before_any_resolver(
    project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("NET_AGENT_MODEL", "model.example.invalid:443")
    project.makepyfile(
        test_inner="""
        import pytest

        @pytest.mark.chronicle_replay("traces/run.jsonl", stub=(), live={"kind:llm"})
        def test_lookup(chronicle_replay):
            with pytest.raises(Exception) as caught:
                chronicle_replay.rerun()
            assert type(caught.value).__name__ == "NetworkBlockedError"
            assert caught.value.operation == "lookup" and caught.value.host == "model.example.invalid"
            assert not isinstance(caught.value, OSError)
        """
    )
    result = project.runpytest("-p", "no:cacheprovider")
    # The test body passes; the refusal is still a divergence of the replay, which fails the test.
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*[[]network[]]*lookup of model.example.invalid*"])


def test_the_default_allows_this_machine_and_the_option_turns_the_guard_off(
    project: pytest.Pytester, listener: Listener, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("NET_AGENT_MODEL", f"127.0.0.1:{listener.port}")
    project.makepyfile(
        test_inner="""
        import pytest

        @pytest.mark.chronicle_replay("traces/run.jsonl", stub=(), live={"kind:llm"})
        def test_loopback(chronicle_replay):
            assert chronicle_replay.rerun() == "filled"

        @pytest.mark.chronicle_replay("traces/run.jsonl", stub=(), live={"kind:llm"}, allow_hosts=())
        def test_nothing_allowed(chronicle_replay):
            assert chronicle_replay.rerun() == "filled"
        """
    )
    result = project.runpytest("-p", "no:cacheprovider", "-k", "loopback")
    result.assert_outcomes(passed=1, deselected=1)
    assert listener.accepted == 1
    result = project.runpytest("-p", "no:cacheprovider", "--chronicle-allow-network")
    result.assert_outcomes(passed=2)
    assert listener.accepted == 3


def test_a_typo_in_a_selector_errors_before_any_model_call(project: pytest.Pytester) -> None:
    project.makepyfile(
        test_inner="""
        import pytest

        @pytest.mark.chronicle_replay("traces/run.jsonl", stub={"kind:lm"})
        def test_typo(chronicle_replay):
            raise AssertionError("the test body must not run")
        """
    )
    result = project.runpytest("-p", "no:cacheprovider")
    result.assert_outcomes(errors=1)  # the fixture refuses the selector: the body, and the model, never run
    result.stdout.fnmatch_lines(["*ConfigError: invalid value for stub: 'kind:lm'; expected one of 'kind:llm'*"])


def test_strict_drift_fails_the_test_itself(project: pytest.Pytester) -> None:
    project.makepyfile(
        test_inner="""
        import pytest

        @pytest.mark.chronicle_replay("traces/run.jsonl", strict=True)
        def test_strict(chronicle_replay):
            chronicle_replay.rerun(request="sell $2,000")  # the stubbed plan sees another input: drift
        """
    )
    result = project.runpytest("-p", "no:cacheprovider")
    result.assert_outcomes(failed=1, errors=0)
    result.stdout.fnmatch_lines(["*[[]input-drift, unexplained[]] net.run[[]0[]] > net.plan[[]0[]]*"])


def test_an_override_on_the_marker(project: pytest.Pytester) -> None:
    project.makepyfile(
        test_inner="""
        import pytest

        @pytest.mark.chronicle_replay("traces/run.jsonl", override={"net.plan[0]": {"qty": 5}})
        def test_what_if(chronicle_replay):
            assert chronicle_replay.rerun() == "filled"
            assert [f.kind for f in chronicle_replay.report.overrides] == ["override"]
        """
    )
    result = project.runpytest("-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)


def test_the_marker_alone_replays_and_misused_arguments_are_errors(project: pytest.Pytester) -> None:
    project.makepyfile(
        test_inner="""
        import pytest
        import netagent

        @pytest.mark.chronicle_replay("traces/run.jsonl")
        def test_marker_only():
            before = netagent.CALLS["llm"]
            assert netagent.run("sell $1,000") == "filled"
            assert netagent.CALLS["llm"] == before  # the plan came from the recording

        @pytest.mark.chronicle_replay("traces/run.jsonl", None, {"kind:tool"})
        def test_three_positional(chronicle_replay):
            pass

        @pytest.mark.chronicle_replay("traces/run.jsonl", None, trace_id="x")
        def test_trace_id_twice(chronicle_replay):
            pass
        """
    )
    result = project.runpytest("-p", "no:cacheprovider")
    result.assert_outcomes(passed=1, errors=2)
    result.stdout.fnmatch_lines(["*give the options by name*", "*trace_id given both by position and by name*"])
