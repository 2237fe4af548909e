"""Refuse network access during a replay, except to an allow-list of hosts.

While at least one :class:`NetworkGuard` is entered anywhere in the process, these :mod:`socket` functions are
replaced by checking versions:

* ``getaddrinfo``, ``gethostbyname``, ``gethostbyname_ex``, ``gethostbyaddr`` and ``getnameinfo``: the name or
  address asked for is checked *before* the original runs, so a refused name never reaches a resolver. A lookup
  with no host (``getaddrinfo(None, port)``, used to bind servers) involves no resolver and is not checked.
* ``socket.socket.connect`` and ``connect_ex``: the address is checked before the system call, and when ``connect``
  is handed a name, the name is checked. A refused socket is closed (clients that clean up only after an
  ``OSError`` would otherwise leak it), and ``connect_ex`` raises instead of returning an error number.

``socket.create_connection`` needs no patch of its own: it calls both through the module and the class. asyncio
does too, on CPython 3.10 to 3.13: ``loop.getaddrinfo`` runs ``socket.getaddrinfo`` (looked up at each call) in the
default executor, and ``loop.sock_connect``, behind ``create_connection``, ``open_connection`` and anyio (httpx's
async transport), skips the resolver for IP literals and calls ``sock.connect``. A refusal is raised as
:class:`~chronicle_otel.errors.NetworkBlockedError`, deliberately no ``OSError`` (its docstring says why).

Allow-list entries are host names (exact, case-insensitive, a trailing dot ignored), IP addresses and CIDR
networks; :data:`DEFAULT_ALLOWED_HOSTS` keeps loopback reachable, and an empty list refuses everything, loopback
included. The addresses that a permitted name resolves to while a guard is active are permitted to it as well,
so allowing ``"mock-llm"`` also allows connecting to wherever ``mock-llm`` resolves. IPv6 zone ids (``%eth0``) are
ignored, and an IPv4-mapped IPv6 address also matches as its IPv4 form. A host written in any other form
(``127.1``, ``0x7f000001``) is taken for a name. AF_UNIX sockets are not network and are never checked; sockets of
other non-IP families are refused.

Several guards. Each thread or asyncio task sees the innermost guard it entered itself (a context variable) and
only that guard's allow-list applies to it. Code running where no guard was entered (the executor thread in which
asyncio resolves names, a thread started inside the block, a background thread) must be permitted by every active
guard, the most restrictive reading; its refusal is reported by the most recently entered guard that refuses.
The patches go in when the first guard is entered and the original functions come back, the same objects, when
the last one exits, unless something else replaced them meanwhile: that replacement then stays, and the checking
functions it may still call pass everything through.

Out of scope: child processes, since the patches live in this interpreter only (a program run with ``subprocess``
or ``os.system``, a ``multiprocessing`` worker started by ``spawn`` or ``forkserver``; a ``fork`` child inherits the
patched module, but its refusals never reach the parent), C code that resolves or connects on its own (direct
``_socket`` calls, uvloop, c-ares/aiodns, gRPC's core, libcurl), functions bound before the guard
(``from socket import getaddrinfo``), and datagrams sent without ``connect`` (``sendto``).
"""

from __future__ import annotations

import contextvars
import ipaddress
import re
import socket
import threading
from collections.abc import Callable, Iterable
from types import TracebackType
from typing import Any, Final

from .._internal.errors import handle_internal_errors
from ..errors import ConfigError, NetworkBlockedError

__all__ = ["DEFAULT_ALLOWED_HOSTS", "AllowList", "NetworkGuard", "find_refusal", "guard", "guard_active"]

DEFAULT_ALLOWED_HOSTS: Final[tuple[str, ...]] = ("localhost", "127.0.0.0/8", "::1")
"""The hosts a replay may reach unless told otherwise: loopback, by name and by address."""

_IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
_IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network
_Port = int | str | None

_NAME: Final = re.compile(r"[a-z0-9_-]+(\.[a-z0-9_-]+)*\.?", re.IGNORECASE)
_EXPECTED: Final = "a host name, an IP address or a CIDR network such as 127.0.0.0/8 (no scheme, no port)"
_AF_UNIX: Final = getattr(socket, "AF_UNIX", None)
_IP_FAMILIES: Final = (socket.AF_INET, socket.AF_INET6)
_MISSING: Final = object()


def _parse_ip(host: str) -> _IPAddress | None:
    """The address ``host`` spells (an IPv6 zone id dropped), or None when it is a name.

    Only an IPv6 address has a zone: ``127.0.0.1%x.test`` is a name to the system resolver, and stays one here.
    """
    try:
        return ipaddress.ip_address(host.partition("%")[0] if ":" in host else host)
    except ValueError:
        return None


def _normal_name(name: str) -> str:
    # A trailing dot is kept: "localhost." is a fully qualified name the system resolver sends to DNS, while
    # "localhost" is answered from /etc/hosts.
    return name.lower()


class AllowList:
    """A parsed allow-list of host names, IP addresses and CIDR networks.

    Args:
        entries: host names (``"localhost"``), addresses (``"127.0.0.1"``, ``"::1"``) and networks
            (``"127.0.0.0/8"``). Host bits set in a network (``"10.0.0.1/8"``) are ignored.

    Raises:
        ConfigError: ``entries`` is a single string, or an entry is not a string, is empty or is none of the above.
    """

    __slots__ = ("_names", "_networks", "entries")

    def __init__(self, entries: Iterable[str]) -> None:
        if isinstance(entries, (str, bytes)):
            raise ConfigError("allow_hosts", entries, "a list of host names, addresses or networks, not one string")
        names: set[str] = set()
        networks: list[_IPNetwork] = []
        kept: list[str] = []
        for entry in entries:
            if not isinstance(entry, str) or not entry:
                raise ConfigError("allow_hosts", entry, _EXPECTED)
            try:
                networks.append(ipaddress.ip_network(entry, strict=False))
            except ValueError:
                if "/" in entry or not _NAME.fullmatch(entry):
                    raise ConfigError("allow_hosts", entry, _EXPECTED) from None
                names.add(_normal_name(entry))
            kept.append(entry)
        self.entries: tuple[str, ...] = tuple(kept)
        """The entries as given."""
        self._names = frozenset(names)
        self._networks = tuple(networks)

    def permits(self, host: str) -> bool:
        """Whether ``host``, a host name or an IP address, is on the list."""
        address = _parse_ip(host)
        return self._permits_name(host) if address is None else self._permits_address(address)

    def _permits_name(self, name: str) -> bool:
        return _normal_name(name) in self._names

    def _permits_address(self, address: _IPAddress) -> bool:
        if any(address in network for network in self._networks):
            return True
        mapped = address.ipv4_mapped if isinstance(address, ipaddress.IPv6Address) else None
        return mapped is not None and any(mapped in network for network in self._networks)

    def __repr__(self) -> str:
        return f"AllowList({list(self.entries)!r})"


class NetworkGuard:
    """While entered, refuse name lookups and connections to hosts outside ``allow``, in every thread.

    This process only: child processes (``subprocess``, ``os.system``, ``multiprocessing`` by spawn or forkserver)
    are not covered. Re-entrant and nestable; see the module docstring for how several active guards combine.

    Args:
        allow: the host names, addresses and networks that stay reachable (see :class:`AllowList`).
        describe: called when an attempt is refused, in the thread that made it; returns where it happened
            (``"during boundary run_agent[0] > plan[0] (llm)"``) for the error message.
        on_refusal: called with each refusal before it is raised, in the thread that made the attempt, so that it
            is known even when the caller swallows or wraps the error. Its exceptions are logged and do not
            replace the refusal.

    Raises:
        ConfigError: an entry of ``allow`` is invalid.
    """

    def __init__(
        self,
        allow: Iterable[str] = DEFAULT_ALLOWED_HOSTS,
        describe: Callable[[], str] | None = None,
        on_refusal: Callable[[NetworkBlockedError], object] | None = None,
    ) -> None:
        self.allow = AllowList(allow)
        """The parsed allow-list."""
        self._describe = describe
        self._on_refusal = on_refusal
        self._resolved: set[_IPAddress] = set()

    def __enter__(self) -> NetworkGuard:
        _enter(self)
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        _exit(self)

    def _permits(self, host: str, address: _IPAddress | None) -> bool:
        if address is None:
            return self.allow._permits_name(host)
        return self.allow._permits_address(address) or address in self._resolved

    def _refusal(self, host: str, port: _Port, operation: str) -> NetworkBlockedError:
        boundary = ""
        if self._describe is not None:
            with handle_internal_errors("describing where a blocked network call happened", external=True):
                boundary = self._describe()
        error = NetworkBlockedError(host, port, operation=operation, boundary=boundary, allowed=self.allow.entries)
        if self._on_refusal is not None:
            with handle_internal_errors("reporting a blocked network call", external=True):
                self._on_refusal(error)
        return error

    def __repr__(self) -> str:
        return f"NetworkGuard({list(self.allow.entries)!r})"


def guard(
    allow: Iterable[str] = DEFAULT_ALLOWED_HOSTS,
    describe: Callable[[], str] | None = None,
    on_refusal: Callable[[NetworkBlockedError], object] | None = None,
) -> NetworkGuard:
    """A :class:`NetworkGuard` to enter: ``with guard(allow_hosts, where, report_refusal): ...``.

    Args:
        allow: the host names, addresses and networks that stay reachable.
        describe: returns where a refused attempt happened, for the error message.
        on_refusal: called with each refusal before it is raised.

    Raises:
        ConfigError: an entry of ``allow`` is invalid.
    """
    return NetworkGuard(allow, describe, on_refusal)


def guard_active() -> bool:
    """Whether a :class:`NetworkGuard` is entered anywhere in the process (the socket functions are patched)."""
    return bool(_active)


def find_refusal(exc: BaseException) -> NetworkBlockedError | None:
    """The :class:`NetworkBlockedError` behind ``exc``, following causes, contexts and exception groups.

    Network clients wrap errors (anyio's task groups put them in an exception group; SDKs re-raise them as
    their own connection error ``from`` the original): this finds the refusal under the wrapping.
    """
    stack: list[BaseException] = [exc]
    seen: set[int] = set()
    while stack:
        current = stack.pop()
        if id(current) in seen:
            continue
        seen.add(id(current))
        if isinstance(current, NetworkBlockedError):
            return current
        group = getattr(current, "exceptions", None)
        if isinstance(group, tuple):
            stack.extend(e for e in group if isinstance(e, BaseException))
        stack.extend(e for e in (current.__context__, current.__cause__) if e is not None)
    return None


# -- registry ------------------------------------------------------------------------------------------------------

_lock = threading.Lock()
_active: tuple[NetworkGuard, ...] = ()  # one item per open __enter__, oldest first; replaced, never mutated
_installed: dict[tuple[object, str], tuple[object, object]] = {}  # (owner, name) -> (saved, checking function)
_entered: contextvars.ContextVar[tuple[NetworkGuard, ...]] = contextvars.ContextVar(
    "chronicle_network_guards", default=()
)


def _enter(guard: NetworkGuard) -> None:
    global _active
    with _lock:
        if not _active:
            _install()
        _active = (*_active, guard)
    _entered.set((*_entered.get(), guard))


def _exit(guard: NetworkGuard) -> None:
    global _active
    stack = _entered.get()
    if stack and stack[-1] is guard:
        _entered.set(stack[:-1])
    with _lock:
        positions = [i for i, g in enumerate(_active) if g is guard]
        if not positions:
            raise RuntimeError(f"{guard!r} is not entered")
        last = positions[-1]
        _active = _active[:last] + _active[last + 1 :]
        if not _active:
            _uninstall()


def _deciders() -> tuple[NetworkGuard, ...]:
    """The guards that must all permit an attempt made here: the innermost one entered here, or every active one."""
    active = _active
    if not active:
        return ()
    for guard in reversed(_entered.get()):
        if guard in active:
            return (guard,)
    return active


def _check(host: str, port: _Port, operation: str) -> tuple[NetworkGuard, ...]:
    """Raise the refusal if a guard in force refuses ``host``; return the guards that permitted it."""
    deciders = _deciders()
    if deciders:
        address = _parse_ip(host)
        for guard in reversed(deciders):
            if not guard._permits(host, address):
                raise guard._refusal(host, port, operation)
    return deciders


def _remember(guards: tuple[NetworkGuard, ...], hosts: Iterable[object]) -> None:
    """Permit to ``guards`` the addresses a permitted name resolved to."""
    for host in hosts:
        address = _parse_ip(host) if isinstance(host, str) else None
        if address is not None:
            for guard in guards:
                guard._resolved.add(address)


def _as_text(host: object) -> str | None:
    if isinstance(host, (bytes, bytearray, memoryview)):
        return bytes(host).decode("ascii", "replace")
    return host if isinstance(host, str) else None


def _check_lookup(host: object, port: _Port = None) -> tuple[NetworkGuard, ...]:
    text = _as_text(host)
    return () if text is None else _check(text, port, "lookup")  # None (no host) or a type the original rejects


def _check_connect(sock: socket.socket, address: object) -> None:
    if not _active:
        return
    family = sock.family
    if family == _AF_UNIX:
        return
    host: str | None
    port: _Port = None
    if family in _IP_FAMILIES:
        if not (isinstance(address, tuple) and len(address) >= 2):
            return  # the original raises its own TypeError
        host = _as_text(address[0])
        port = address[1] if isinstance(address[1], (int, str)) else None
        if host is None:
            return
    else:
        host = str(address)
    try:
        _check(host, port, "connect")
    except NetworkBlockedError:
        sock.close()
        raise


# -- checking functions --------------------------------------------------------------------------------------------


def _make_getaddrinfo(original: Callable[..., Any]) -> Callable[..., Any]:
    def getaddrinfo(host: Any, port: Any, *args: Any, **kwargs: Any) -> Any:
        guards = _check_lookup(host, port if isinstance(port, (int, str)) else None)
        infos = original(host, port, *args, **kwargs)
        if guards:
            _remember(guards, (info[4][0] for info in infos))
        return infos

    return getaddrinfo


def _make_gethostbyname(original: Callable[..., Any]) -> Callable[..., Any]:
    def gethostbyname(hostname: Any) -> Any:
        guards = _check_lookup(hostname)
        address = original(hostname)
        if guards:
            _remember(guards, [address])
        return address

    return gethostbyname


def _make_gethostbyname_ex(original: Callable[..., Any]) -> Callable[..., Any]:
    def gethostbyname_ex(hostname: Any) -> Any:
        guards = _check_lookup(hostname)
        result = original(hostname)
        if guards:
            _remember(guards, result[2])
        return result

    return gethostbyname_ex


def _loopback(host: object) -> _IPAddress | None:
    """The loopback address ``host`` spells, or None."""
    text = _as_text(host)
    address = _parse_ip(text) if text is not None else None
    if address is not None and isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    return address if address is not None and address.is_loopback else None


def _make_gethostbyaddr(original: Callable[..., Any]) -> Callable[..., Any]:
    def gethostbyaddr(ip_address: Any) -> Any:
        if _active:
            # A reverse lookup asks DNS (a PTR query) even for this machine's addresses: loopback is answered
            # here, anything else must be allowed.
            looped = _loopback(ip_address)
            if looped is not None:
                return ("localhost", [], [str(looped)])
            _check_lookup(ip_address)
        return original(ip_address)

    return gethostbyaddr


def _make_getnameinfo(original: Callable[..., Any]) -> Callable[..., Any]:
    def getnameinfo(sockaddr: Any, flags: Any) -> Any:
        if _active and isinstance(sockaddr, tuple) and len(sockaddr) >= 2:
            numeric = isinstance(flags, int) and flags & socket.NI_NUMERICHOST
            if not numeric:
                if _loopback(sockaddr[0]) is not None:  # answered here, as gethostbyaddr
                    service = original(sockaddr, flags | socket.NI_NUMERICHOST)[1]
                    return ("localhost", service)
                _check_lookup(sockaddr[0], sockaddr[1] if isinstance(sockaddr[1], int) else None)
        return original(sockaddr, flags)

    return getnameinfo


def _make_connect(original: Callable[..., Any]) -> Callable[..., Any]:
    def connect(self: socket.socket, address: Any, /) -> Any:
        _check_connect(self, address)
        return original(self, address)

    return connect


def _make_sendto(original: Callable[..., Any]) -> Callable[..., Any]:
    def sendto(self: socket.socket, data: Any, *rest: Any) -> Any:
        if rest:  # (address) or (flags, address): a datagram, or a TCP Fast Open connection
            _check_connect(self, rest[-1])
        return original(self, data, *rest)

    return sendto


def _make_sendmsg(original: Callable[..., Any]) -> Callable[..., Any]:
    def sendmsg(self: socket.socket, buffers: Any, *rest: Any) -> Any:
        if len(rest) >= 3 and rest[2] is not None:  # ancdata, flags, address
            _check_connect(self, rest[2])
        return original(self, buffers, *rest)

    return sendmsg


def _make_connect_ex(original: Callable[..., Any]) -> Callable[..., Any]:
    def connect_ex(self: socket.socket, address: Any, /) -> Any:
        _check_connect(self, address)
        return original(self, address)

    return connect_ex


_PATCHES: Final[tuple[tuple[object, str, Callable[[Callable[..., Any]], Callable[..., Any]]], ...]] = (
    (socket, "getaddrinfo", _make_getaddrinfo),
    (socket, "gethostbyname", _make_gethostbyname),
    (socket, "gethostbyname_ex", _make_gethostbyname_ex),
    (socket, "gethostbyaddr", _make_gethostbyaddr),
    (socket, "getnameinfo", _make_getnameinfo),
    (socket.socket, "connect", _make_connect),
    (socket.socket, "connect_ex", _make_connect_ex),
    (socket.socket, "sendto", _make_sendto),
    *(((socket.socket, "sendmsg", _make_sendmsg),) if hasattr(socket.socket, "sendmsg") else ()),
)


def _install() -> None:
    for owner, name, make in _PATCHES:
        saved = vars(owner).get(name, _MISSING)
        checking = make(getattr(owner, name))
        setattr(owner, name, checking)
        _installed[(owner, name)] = (saved, checking)


def _uninstall() -> None:
    for (owner, name), (saved, checking) in _installed.items():
        if vars(owner).get(name) is not checking:
            continue  # replaced by someone else meanwhile: leave theirs (ours, if it still calls it, passes through)
        if saved is _MISSING:
            delattr(owner, name)
        else:
            setattr(owner, name, saved)
    _installed.clear()
