"""Internal failure policy: chronicle_otel never breaks the instrumented code.

Everything chronicle does around a user's call (binding, encoding, redacting, exporting, storing)
runs inside :func:`handle_internal_errors`. A failure is logged once per cause (its type and the
place it was raised), with the message "your code still runs, with less telemetry", and swallowed.

The project's own test suite sets :data:`RAISE_INTERNAL_ERRORS` so that bugs surface as failures.
It is deliberately not keyed on ``PYTEST_CURRENT_TEST``: users run chronicle inside their own pytest.
"""

from __future__ import annotations

import logging
import threading
import traceback
from collections.abc import Iterator
from contextlib import contextmanager

logger = logging.getLogger("chronicle_otel")

#: Re-raise internal errors instead of logging them. For chronicle_otel's own tests only.
RAISE_INTERNAL_ERRORS = False

_seen: set[tuple[str, str]] = set()
_seen_lock = threading.Lock()
_MAX_SEEN = 1024


def _cause(exc: BaseException) -> tuple[str, str]:
    tb = traceback.extract_tb(exc.__traceback__)
    where = f"{tb[-1].filename}:{tb[-1].lineno}" if tb else "?"
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


@contextmanager
def handle_internal_errors(what: str) -> Iterator[None]:
    """Swallow and log (once per cause) any exception raised in the block."""
    try:
        yield
    except Exception as exc:
        if RAISE_INTERNAL_ERRORS:
            raise
        log_once(what, exc)


def reset_seen() -> None:
    """Forget which causes were logged (for tests)."""
    with _seen_lock:
        _seen.clear()
