"""The replay network guard: lookups and connections outside the allow-list are refused, before any resolver or
system call, in every thread, and the socket module is left exactly as it was.

Real sockets on 127.0.0.1 only. Names are ``*.invalid`` and every resolver function is replaced by a counting fake
(``resolver``), so nothing is ever resolved for real, even if the guard failed.
"""

from __future__ import annotations

import asyncio
import ipaddress
import logging
import socket
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from hypothesis import given
from hypothesis import strategies as st

from chronicle_otel.errors import ConfigError, NetworkBlockedError, ReplayError
from chronicle_otel.replaying._netguard import (
    DEFAULT_ALLOWED_HOSTS,
    AllowList,
    NetworkGuard,
    find_refusal,
    guard,
    guard_active,
)

if sys.version_info >= (3, 11):
    from builtins import BaseExceptionGroup
else:
    from exceptiongroup import BaseExceptionGroup

PATCHED = [
    (socket, "getaddrinfo"),
    (socket, "gethostbyname"),
    (socket, "gethostbyname_ex"),
    (socket, "gethostbyaddr"),
    (socket, "getnameinfo"),
    (socket.socket, "connect"),
    (socket.socket, "connect_ex"),
]
MISSING = object()


class Listener:
    """A listening socket on loopback; the kernel queues connections, :meth:`accepted` takes one if any came."""

    def __init__(self, family: socket.AddressFamily = socket.AF_INET, host: str = "127.0.0.1") -> None:
        self.sock = socket.socket(family)
        self.sock.bind((host, 0))
        self.sock.listen(8)
        self.sock.settimeout(0.2)
        self.host = host
        self.port: int = self.sock.getsockname()[1]

    def accepted(self) -> bool:
        try:
            conn, _ = self.sock.accept()
        except TimeoutError:
            return False
        conn.close()
        return True

    def close(self) -> None:
        self.sock.close()


class Resolver:
    """Counting stand-ins for the socket module's resolver functions; only ``table`` names resolve."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, object]] = []
        self.table: dict[str, str] = {}

    def _resolve(self, function: str, host: object) -> str:
        self.calls.append((function, host))
        if host is None:
            return "127.0.0.1"
        if isinstance(host, str) and host.lower().rstrip(".") in self.table:
            return self.table[host.lower().rstrip(".")]
        if isinstance(host, str) and host.startswith("127."):
            return host
        raise socket.gaierror(socket.EAI_NONAME, "not in the test table")

    def getaddrinfo(self, host: object, port: Any, *args: Any, **kwargs: Any) -> list[Any]:
        address = self._resolve("getaddrinfo", host)
        return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", (address, port))]

    def gethostbyname(self, host: object) -> str:
        return self._resolve("gethostbyname", host)

    def gethostbyname_ex(self, host: object) -> tuple[str, list[str], list[str]]:
        return (str(host), [], [self._resolve("gethostbyname_ex", host)])

    def gethostbyaddr(self, host: object) -> tuple[str, list[str], list[str]]:
        return ("name.invalid", [], [self._resolve("gethostbyaddr", host)])

    def getnameinfo(self, sockaddr: tuple[Any, ...], flags: int) -> tuple[str, str]:
        self._resolve("getnameinfo", sockaddr[0])
        return ("name.invalid", str(sockaddr[1]))


@pytest.fixture(autouse=True)
def no_guard_left() -> Iterator[None]:
    assert not guard_active()
    yield
    assert not guard_active()


@pytest.fixture
def listener() -> Iterator[Listener]:
    server = Listener()
    yield server
    server.close()


@pytest.fixture
def resolver(monkeypatch: pytest.MonkeyPatch) -> Resolver:
    fake = Resolver()
    for name in ("getaddrinfo", "gethostbyname", "gethostbyname_ex", "gethostbyaddr", "getnameinfo"):
        monkeypatch.setattr(socket, name, getattr(fake, name))
    return fake


def raised(action: Callable[[], object]) -> BaseException:
    try:
        action()
    except BaseException as exc:
        return exc
    raise AssertionError("nothing was raised")


def refusal_of(action: Callable[[], object]) -> NetworkBlockedError:
    with pytest.raises(NetworkBlockedError) as info:
        action()
    return info.value


def connect(port: int, host: str = "127.0.0.1") -> None:
    with socket.create_connection((host, port), timeout=5):
        pass


def connect_raw(port: int, host: str = "127.0.0.1") -> None:
    with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET) as sock:
        sock.settimeout(5)
        sock.connect((host, port))


# -- connections -----------------------------------------------------------------------------------------------------


def test_an_empty_allow_list_refuses_loopback_and_nothing_reaches_the_listener(listener: Listener) -> None:
    with NetworkGuard([]):
        error = refusal_of(lambda: connect_raw(listener.port))
    assert (error.host, error.port, error.operation) == ("127.0.0.1", listener.port, "connect")
    assert not listener.accepted()


def test_the_default_allow_list_lets_loopback_through(listener: Listener) -> None:
    assert DEFAULT_ALLOWED_HOSTS == ("localhost", "127.0.0.0/8", "::1")
    with NetworkGuard():
        connect_raw(listener.port)
        connect(listener.port)
    assert listener.accepted()
    assert listener.accepted()


def test_create_connection_with_an_ip_literal_is_refused_at_its_lookup(listener: Listener, resolver: Resolver) -> None:
    with NetworkGuard(["localhost"]):
        error = refusal_of(lambda: connect(listener.port))
    assert (error.host, error.operation) == ("127.0.0.1", "lookup")
    assert resolver.calls == []
    assert not listener.accepted()


def test_connect_ex_raises_instead_of_returning_an_errno(listener: Listener) -> None:
    with NetworkGuard([]), socket.socket() as sock:
        refusal_of(lambda: sock.connect_ex(("127.0.0.1", listener.port)))
    assert not listener.accepted()


def test_a_refused_socket_is_closed(listener: Listener) -> None:
    sock = socket.socket()
    with NetworkGuard([]):
        refusal_of(lambda: sock.connect(("127.0.0.1", listener.port)))
    assert sock.fileno() == -1


def test_a_connect_to_a_name_is_checked_as_the_name(listener: Listener, resolver: Resolver) -> None:
    with NetworkGuard(), socket.socket() as sock:
        error = refusal_of(lambda: sock.connect(("api.invalid", listener.port)))
    assert (error.host, error.port, error.operation) == ("api.invalid", listener.port, "connect")
    assert "the connection to api.invalid:" in str(error)


def test_a_connect_from_another_thread_is_refused(listener: Listener) -> None:
    errors: list[BaseException] = []

    def attempt() -> None:
        try:
            connect_raw(listener.port)
        except BaseException as exc:
            errors.append(exc)

    with NetworkGuard([]):
        worker = threading.Thread(target=attempt)
        worker.start()
        worker.join(10)
    assert len(errors) == 1 and isinstance(errors[0], NetworkBlockedError)
    assert not listener.accepted()


def test_af_unix_sockets_are_not_network(tmp_path: Path) -> None:
    if not hasattr(socket, "AF_UNIX"):
        pytest.skip("no AF_UNIX on this platform")
    path = str(tmp_path / "s")
    with socket.socket(socket.AF_UNIX) as server, socket.socket(socket.AF_UNIX) as client:
        server.bind(path)
        server.listen(1)
        with NetworkGuard([]):
            client.connect(path)
        conn, _ = server.accept()
        conn.close()


def _ipv6_loopback() -> Listener | None:
    if not socket.has_ipv6:
        return None
    try:
        return Listener(socket.AF_INET6, "::1")
    except OSError:
        return None


def test_ipv6_loopback() -> None:
    server = _ipv6_loopback()
    if server is None:
        pytest.skip("no IPv6 loopback on this machine")
    try:
        with NetworkGuard():
            connect_raw(server.port, "::1")
        assert server.accepted()
        with NetworkGuard(["127.0.0.0/8"]):
            error = refusal_of(lambda: connect_raw(server.port, "::1"))
        assert error.host == "::1"
        assert f"the connection to [::1]:{server.port}" in str(error)
        assert not server.accepted()
    finally:
        server.close()


# -- lookups ---------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("allow", [[], list(DEFAULT_ALLOWED_HOSTS)], ids=["empty", "default"])
def test_a_refused_name_never_reaches_the_resolver(resolver: Resolver, allow: list[str]) -> None:
    with NetworkGuard(allow):
        error = refusal_of(lambda: socket.getaddrinfo("x.invalid", 443))
    assert (error.host, error.port, error.operation) == ("x.invalid", 443, "lookup")
    assert "the lookup of x.invalid" in str(error)
    assert resolver.calls == []


@pytest.mark.parametrize(
    ("function", "argument"),
    [
        ("gethostbyname", "x.invalid"),
        ("gethostbyname_ex", "x.invalid"),
        ("gethostbyaddr", "x.invalid"),
    ],
)
def test_every_resolver_function_is_checked(resolver: Resolver, function: str, argument: str) -> None:
    with NetworkGuard([]):
        error = refusal_of(lambda: getattr(socket, function)(argument))
    assert (error.host, error.operation) == (argument, "lookup")
    assert resolver.calls == []


def test_reverse_lookups_of_this_machine_are_answered_without_a_resolver(resolver: Resolver) -> None:
    # A reverse lookup is a PTR query to DNS even for loopback: the guard answers it itself.
    with NetworkGuard([]):
        assert socket.gethostbyaddr("127.0.0.9") == ("localhost", [], ["127.0.0.9"])
        assert socket.gethostbyaddr("::1") == ("localhost", [], ["::1"])
        assert socket.getnameinfo(("127.0.0.1", 80), 0) == ("localhost", "80")
        error = refusal_of(lambda: socket.getnameinfo(("x.invalid", 80), 0))
    assert (error.host, error.port) == ("x.invalid", 80)
    # only the numeric form is asked of the system (for the service), never a reverse lookup
    assert {call[0] for call in resolver.calls} <= {"getnameinfo"}
    assert all(call[1] == "127.0.0.1" for call in resolver.calls)


def test_an_ipv4_address_with_a_zone_is_a_name() -> None:
    # The system resolver reads "127.0.0.1%x.invalid" as a name: it must not pass for the address.
    assert not AllowList(["127.0.0.0/8"]).permits("127.0.0.1%x.invalid")
    assert AllowList(["fe80::/10"]).permits("fe80::1%eth0")


def test_an_ip_literal_lookup_is_checked_as_an_address(resolver: Resolver) -> None:
    with NetworkGuard(["localhost"]):
        refusal_of(lambda: socket.getaddrinfo("127.0.0.1", 80))
    with NetworkGuard(["127.0.0.1"]):
        socket.getaddrinfo("127.0.0.1", 80)
    assert resolver.calls == [("getaddrinfo", "127.0.0.1")]


def test_names_match_case_insensitively_and_a_lookup_without_host_is_not_checked(resolver: Resolver) -> None:
    resolver.table["svc.invalid"] = "127.0.0.1"
    with NetworkGuard(["Svc.Invalid"]):
        socket.getaddrinfo("SVC.INVALID", 80)
        socket.gethostbyname("svc.invalid")
        socket.getaddrinfo(None, 80)
        refusal_of(lambda: socket.getaddrinfo("svc.invalid.", 80))  # fully qualified: another name to DNS
    assert resolver.calls == [("getaddrinfo", "SVC.INVALID"), ("gethostbyname", "svc.invalid"), ("getaddrinfo", None)]


def test_an_allowed_name_allows_the_addresses_it_resolves_to(listener: Listener, resolver: Resolver) -> None:
    resolver.table["mock-llm.invalid"] = "127.0.0.1"
    with NetworkGuard(["mock-llm.invalid"]):
        refusal_of(lambda: connect_raw(listener.port))  # not by address, before the name was looked up
        connect(listener.port, "mock-llm.invalid")
        connect_raw(listener.port)
    assert listener.accepted() and listener.accepted()
    with NetworkGuard(["mock-llm.invalid"]):
        refusal_of(lambda: connect_raw(listener.port))  # what one guard resolved is not another's


# -- asyncio and httpx -----------------------------------------------------------------------------------------------


async def test_asyncio_open_connection_is_refused(listener: Listener) -> None:
    with NetworkGuard([]):
        error = await _refusal_async(asyncio.open_connection("127.0.0.1", listener.port))
    assert error.operation == "connect"
    assert not listener.accepted()


async def test_asyncio_resolves_in_an_executor_thread_and_is_refused_there(
    listener: Listener, resolver: Resolver
) -> None:
    threads: list[str] = []
    with NetworkGuard([], on_refusal=lambda _: threads.append(threading.current_thread().name)):
        error = await _refusal_async(asyncio.open_connection("x.invalid", listener.port))
    assert (error.host, error.operation) == ("x.invalid", "lookup")
    assert resolver.calls == []
    assert len(threads) == 1 and threads[0] != threading.current_thread().name


async def test_asyncio_connects_with_the_default_allow_list(listener: Listener) -> None:
    with NetworkGuard():
        _, writer = await asyncio.open_connection("127.0.0.1", listener.port)
        writer.close()
        await writer.wait_closed()
    assert listener.accepted()


async def _refusal_async(attempt: Any) -> NetworkBlockedError:
    with pytest.raises(NetworkBlockedError) as info:
        await attempt
    return info.value


def test_httpx_sync_surfaces_the_refusal(listener: Listener) -> None:
    with NetworkGuard([]), httpx.Client() as client:
        error = raised(lambda: client.get(f"http://127.0.0.1:{listener.port}/"))
    assert find_refusal(error) is not None
    assert not listener.accepted()


async def test_httpx_async_surfaces_the_refusal(listener: Listener) -> None:
    with NetworkGuard([]):
        async with httpx.AsyncClient() as client:
            try:
                await client.get(f"http://127.0.0.1:{listener.port}/")
            except BaseException as exc:
                error = exc
            else:
                raise AssertionError("nothing was raised")
    assert find_refusal(error) is not None  # anyio delivers it inside an exception group
    assert not listener.accepted()


def test_find_refusal_follows_causes_contexts_and_groups() -> None:
    refusal = NetworkBlockedError("x.invalid", operation="lookup")
    try:
        try:
            raise refusal
        except NetworkBlockedError as exc:
            raise RuntimeError("wrapped") from exc
    except RuntimeError as wrapped:
        assert find_refusal(wrapped) is refusal
        group = BaseExceptionGroup("group", [ValueError("other"), wrapped])
        assert find_refusal(group) is refusal
    assert find_refusal(ValueError("unrelated")) is None


# -- the error, the callbacks ----------------------------------------------------------------------------------------


def test_the_error_names_the_attempt_the_boundary_the_allow_list_and_the_way_out(listener: Listener) -> None:
    where = "during boundary run_agent[0] > plan[0] (llm)"
    with NetworkGuard(["localhost"], lambda: where):
        error = refusal_of(lambda: connect_raw(listener.port))
    assert isinstance(error, ReplayError) and not isinstance(error, OSError)
    assert error.boundary == where
    assert error.allowed == ("localhost",)
    message = str(error)
    assert f"the connection to 127.0.0.1:{listener.port} {where}" in message
    assert "allowed hosts: localhost" in message
    for way_out in ("allow_hosts=", "block_network=False", "--chronicle-allow-network"):
        assert way_out in message
    with NetworkGuard([]):
        assert "allowed hosts: none" in str(refusal_of(lambda: connect_raw(listener.port)))


def test_a_child_process_is_not_guarded_and_the_refusal_says_so(listener: Listener) -> None:
    connect = f"import socket; socket.create_connection(('127.0.0.1', {listener.port}), timeout=5).close()"
    with NetworkGuard([]):
        message = str(refusal_of(lambda: connect_raw(listener.port)))
        child = subprocess.run([sys.executable, "-c", connect], capture_output=True, text=True, timeout=60)
    assert child.returncode == 0, child.stderr
    assert listener.accepted()  # the child's connection, made while the parent's was refused
    assert "The guard covers this process only: child processes" in message
    for way_around in ("subprocess", "os.system", "multiprocessing's spawn and forkserver"):
        assert way_around in message


def test_on_refusal_sees_each_refusal_once(listener: Listener, resolver: Resolver) -> None:
    seen: list[NetworkBlockedError] = []
    with guard([], None, seen.append):
        first = refusal_of(lambda: connect_raw(listener.port))
        second = refusal_of(lambda: socket.getaddrinfo("x.invalid", 80))
    assert seen == [first, second]


def test_failing_callbacks_do_not_replace_the_refusal(listener: Listener, caplog: pytest.LogCaptureFixture) -> None:
    def broken() -> Any:
        raise RuntimeError("callback bug")

    with caplog.at_level(logging.DEBUG, "chronicle_otel"), NetworkGuard([], broken, on_refusal=lambda _: broken()):
        error = refusal_of(lambda: connect_raw(listener.port))
    assert error.boundary == ""
    assert "callback bug" in caplog.text


# -- installation ----------------------------------------------------------------------------------------------------


def _current() -> list[object]:
    return [vars(owner).get(name, MISSING) for owner, name in PATCHED]


def test_the_originals_come_back_identical() -> None:
    before = _current()
    assert "connect" not in vars(socket.socket)
    with NetworkGuard():
        assert guard_active()
        assert all(now is not then for now, then in zip(_current(), before, strict=True))
    assert all(now is then for now, then in zip(_current(), before, strict=True))
    with pytest.raises(KeyError), NetworkGuard():
        raise KeyError("inside")
    assert all(now is then for now, then in zip(_current(), before, strict=True))
    assert "connect" not in vars(socket.socket)


def test_a_replacement_made_inside_the_guard_is_left_in_place(resolver: Resolver) -> None:
    def replacement(*args: Any, **kwargs: Any) -> Any:
        return []

    original = socket.getaddrinfo
    try:
        with NetworkGuard([]):
            socket.getaddrinfo = replacement
        assert socket.getaddrinfo is replacement
    finally:
        socket.getaddrinfo = original


def test_nested_guards_apply_the_innermost_and_restore_only_at_the_last_exit(listener: Listener) -> None:
    before = _current()
    with NetworkGuard([]):
        with NetworkGuard():
            connect_raw(listener.port)
        assert guard_active()
        refusal_of(lambda: connect_raw(listener.port))
        assert all(now is not then for now, then in zip(_current(), before, strict=True))
    assert all(now is then for now, then in zip(_current(), before, strict=True))
    assert listener.accepted() and not listener.accepted()


def test_one_guard_enters_re_entrantly() -> None:
    guard = NetworkGuard([])
    with guard:
        with guard:
            pass
        assert guard_active()
    with pytest.raises(RuntimeError, match="not entered"):
        guard.__exit__(None, None, None)


def test_a_thread_without_a_guard_of_its_own_must_satisfy_every_active_guard(listener: Listener) -> None:
    results: list[str] = []

    def attempt() -> None:
        try:
            connect_raw(listener.port)
            results.append("connected")
        except NetworkBlockedError:
            results.append("refused")

    with NetworkGuard([]), NetworkGuard():
        connect_raw(listener.port)  # the innermost guard of this thread allows loopback
        worker = threading.Thread(target=attempt)
        worker.start()
        worker.join(10)
    assert results == ["refused"]


def test_concurrent_guards_in_two_threads_each_apply_their_own(listener: Listener) -> None:
    both_in = threading.Barrier(2, timeout=10)
    done = threading.Barrier(2, timeout=10)
    results: dict[str, str] = {}

    def run(name: str, allow: list[str]) -> None:
        with NetworkGuard(allow):
            both_in.wait()
            try:
                connect_raw(listener.port)
                results[name] = "connected"
            except NetworkBlockedError:
                results[name] = "refused"
            done.wait()

    workers = [
        threading.Thread(target=run, args=("open", list(DEFAULT_ALLOWED_HOSTS))),
        threading.Thread(target=run, args=("closed", [])),
    ]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(10)
    assert results == {"open": "connected", "closed": "refused"}
    assert listener.accepted() and not listener.accepted()


def test_installation_is_thread_safe() -> None:
    before = _current()
    start = threading.Barrier(8, timeout=10)

    def churn() -> None:
        start.wait()
        for _ in range(200):
            with NetworkGuard():
                pass

    workers = [threading.Thread(target=churn) for _ in range(8)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(30)
    assert all(now is then for now, then in zip(_current(), before, strict=True))


# -- the allow-list --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "entry", [42, None, "", "127.0.0.0/33", "10.0.0.0/8/1", "::1/129", "http://localhost", "localhost:8080", "a b"]
)
def test_a_bad_entry_is_a_config_error_naming_it(entry: Any) -> None:
    with pytest.raises(ConfigError) as info:
        NetworkGuard(["localhost", entry])
    assert info.value.name == "allow_hosts"
    assert info.value.value == entry
    assert repr(entry) in str(info.value)


def test_a_single_string_is_not_an_allow_list() -> None:
    with pytest.raises(ConfigError, match="not one string"):
        AllowList("localhost")


def test_allow_list_entries() -> None:
    allow = AllowList(["LocalHost", "10.1.2.3", "192.168.0.0/16", "fe80::/10", "10.0.0.9/8"])
    assert allow.entries == ("LocalHost", "10.1.2.3", "192.168.0.0/16", "fe80::/10", "10.0.0.9/8")
    assert allow.permits("LOCALHOST") and not allow.permits("localhost.")
    assert not allow.permits("localhost.invalid")
    assert allow.permits("10.200.0.1")  # host bits in a network entry are ignored
    assert allow.permits("192.168.3.4") and not allow.permits("192.169.0.1")
    assert allow.permits("fe80::1%eth0")  # the zone id is dropped
    assert not allow.permits("127.1")  # not a canonical address: a name, and not on the list
    assert AllowList(["127.0.0.0/8"]).permits("::ffff:127.0.0.1")  # IPv4-mapped
    assert not AllowList([]).permits("127.0.0.1") and not AllowList([]).permits("localhost")


@given(st.ip_addresses(v=4), st.integers(0, 32), st.ip_addresses(v=4))
def test_ipv4_addresses_match_the_networks_that_contain_them(
    base: ipaddress.IPv4Address, prefix: int, address: ipaddress.IPv4Address
) -> None:
    network = ipaddress.ip_network(f"{base}/{prefix}", strict=False)
    assert AllowList([str(network)]).permits(str(address)) == (address in network)
    assert AllowList([str(base)]).permits(str(address)) == (address == base)


@given(st.ip_addresses(v=6), st.integers(0, 128), st.ip_addresses(v=6))
def test_ipv6_addresses_match_the_networks_that_contain_them(
    base: ipaddress.IPv6Address, prefix: int, address: ipaddress.IPv6Address
) -> None:
    network = ipaddress.ip_network(f"{base}/{prefix}", strict=False)
    mapped = address.ipv4_mapped
    assert AllowList([str(network)]).permits(str(address)) == (address in network)
    assert AllowList(["0.0.0.0/0"]).permits(str(address)) == (mapped is not None)


def _is_ip(text: str) -> bool:
    try:
        ipaddress.ip_address(text)
    except ValueError:
        return False
    return True


NAMES = st.from_regex(r"[a-z0-9-]{1,12}(\.[a-z0-9-]{1,12}){0,3}", fullmatch=True).filter(lambda n: not _is_ip(n))


@given(NAMES, st.ip_addresses())
def test_names_match_only_themselves_and_never_an_address(name: str, address: Any) -> None:
    allow = AllowList([name])
    assert allow.permits(name.upper()) and not allow.permits(name + ".")
    assert not allow.permits(name + "x.invalid")
    assert not allow.permits(str(address))


def test_datagrams_and_bytes_hosts_are_checked(listener: Listener) -> None:
    receiver = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    receiver.bind(("127.0.0.1", 0))
    receiver.settimeout(0.2)
    port = receiver.getsockname()[1]
    try:
        with NetworkGuard([]):
            sender = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            try:
                error = refusal_of(lambda: sender.sendto(b"x", ("127.0.0.1", port)))
                assert (error.host, error.operation) == ("127.0.0.1", "connect")
                if hasattr(sender, "sendmsg"):
                    refusal_of(lambda: sender.sendmsg([b"x"], [], 0, ("127.0.0.1", port)))
            finally:
                sender.close()
            raw = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            try:
                error = refusal_of(lambda: raw.connect((bytearray(b"127.0.0.1"), listener.port)))
                assert error.host == "127.0.0.1"
            finally:
                raw.close()
        with pytest.raises(TimeoutError):
            receiver.recvfrom(16)  # nothing arrived
        assert not listener.accepted()
    finally:
        receiver.close()
