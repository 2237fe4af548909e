"""Internal failure policy: chronicle_otel never breaks the instrumented code.

Everything chronicle does around a user's call (binding, encoding, redacting, exporting, storing)
runs inside :class:`handle_internal_errors`. A failure is logged once per cause (its type and the
place it was raised), with the message "your code still runs, with less telemetry", and swallowed.

The project's own test suite sets :data:`RAISE_INTERNAL_ERRORS` so that bugs surface as failures.
It is deliberately not keyed on ``PYTEST_CURRENT_TEST``: users run chronicle inside their own pytest.

Usage::

    with handle_internal_errors("recording the result of boundary %r", name):
        ...                                   # an exception here is logged once and swallowed

    with handle_internal_errors("forwarding spans with %s", exporter_name, external=True):
        forward_to.export(spans)              # someone else's code: logged even in our own tests

A guard holds no per-use state: build it once and enter it as often as needed, from any thread.
"""

from __future__ import annotations

import logging
import threading
from types import TracebackType
from typing import Final

logger: Final = logging.getLogger("chronicle_otel")

#: Re-raise internal errors instead of logging them. For chronicle_otel's own tests only.
RAISE_INTERNAL_ERRORS = False

_seen: set[tuple[str, str]] = set()
_seen_lock = threading.Lock()
_MAX_SEEN = 1024


def _cause(exc: BaseException) -> tuple[str, str]:
    tb = exc.__traceback__  # the innermost frame, read directly: no source line is looked up
    while tb is not None and tb.tb_next is not None:
        tb = tb.tb_next
    where = f"{tb.tb_frame.f_code.co_filename}:{tb.tb_lineno}" if tb is not None else "?"
    return (type(exc).__qualname__, where)


def log_once(what: str, exc: BaseException) -> None:
    """Log ``exc`` as a warning the first time its cause is seen, at debug level afterwards."""
    key = _cause(exc)
    with _seen_lock:
        first = key not in _seen
        if first and len(_seen) < _MAX_SEEN:
            _seen.add(key)
    if first:
        logger.warning(
            "chronicle_otel: %s failed (%s: %s); your code still runs, with less telemetry. "
            "Later failures of this kind are logged at DEBUG level.",
            what,
            type(exc).__name__,
            exc,
            exc_info=exc,
        )
    else:
        logger.debug("chronicle_otel: %s failed again (%s: %s)", what, type(exc).__name__, exc)


def warn_once(key: str, message: str, *args: object) -> None:
    """Log ``message`` as a warning once per ``key`` for the life of the process."""
    k = ("warn", key)
    with _seen_lock:
        if k in _seen:
            return
        _seen.add(k)
    logger.warning(message, *args)


class handle_internal_errors:
    """Swallow and log (once per cause) any :class:`Exception` raised in the block.

    ``BaseException`` that is not an ``Exception`` (``KeyboardInterrupt``, ``SystemExit``, cancellation)
    always propagates. Code after the ``with`` block runs when the block failed, so a fallback is written
    as the statement that follows it::

        with guard:
            return bool(user_redactor.redact_key(name))
        return True                           # the block failed: redact

    On a boundary call's own path, where the two method calls of a ``with`` block would show in the
    per-call overhead, the same guard takes an exception its caller caught (:meth:`absorb`)::

        try:
            ...
        except Exception as exc:
            guard.absorb(exc)

    Args:
        what: what the block does, for the log message (``"starting boundary %r"``); ``%``-formatted with
            ``args`` only when a failure is logged.
        *args: the values of ``what``'s placeholders.
        external: the block runs code chronicle does not own (a user's redactor, a forward exporter, the file
            system): its failures are logged even when :data:`RAISE_INTERNAL_ERRORS` is set.
    """

    __slots__ = ("args", "external", "what")

    def __init__(self, what: str, *args: object, external: bool = False) -> None:
        self.what = what
        self.args = args
        self.external = external

    def _swallows(self, exc: Exception) -> bool:
        if RAISE_INTERNAL_ERRORS and not self.external:
            return False
        try:  # noqa: SIM105 - no context manager: it would take frames at the recursion limit
            log_once(self.what % self.args if self.args else self.what, exc)
        except Exception:  # the report itself failed (at the recursion limit, a broken log handler): the user's
            pass  # call goes on with its own value or exception all the same
        return True

    def absorb(self, exc: Exception) -> None:
        """Apply the policy to ``exc``, caught by the caller: log it once, or re-raise it in chronicle's own tests.

        The same as ``exc`` leaving this guard's ``with`` block.
        """
        if not self._swallows(exc):
            raise exc

    def __enter__(self) -> None:
        return None

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> bool:
        return isinstance(exc, Exception) and self._swallows(exc)


def reset_seen() -> None:
    """Forget which causes were logged (for tests)."""
    with _seen_lock:
        _seen.clear()
