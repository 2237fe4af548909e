"""Flush on SIGTERM and SIGINT: containers stop processes with SIGTERM, whose default action skips ``atexit``.

:func:`install` puts a handler in front of the one already installed for each signal. On delivery it flushes
(bounded), then lets the signal take its course: it calls the previous Python handler (uvicorn's, gunicorn's,
``KeyboardInterrupt`` for SIGINT), ignores the signal if it was ignored, or restores the default action and
delivers the signal again, so the process ends with the status it would have had. A server that restores
the handlers it found and re-raises the signal after its graceful shutdown (uvicorn does) reaches this handler
last, after its own shutdown: the spans of the requests it drained are flushed too.

A server whose handler was installed *before* chronicle's (uvicorn's worker processes import the application
inside their signal capture) puts back the default action instead, and the process ends without reaching
chronicle again. So when the handler found is a server's (any Python callable but the default SIGINT handler),
the flush callback is told ``"server"``: the pipeline then exports each trace as its request ends, for the
rest of the graceful shutdown.

Handlers can only be installed from the main thread; elsewhere :func:`install` says so once and spans are
flushed at exit only.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable
from types import FrameType
from typing import Any, Final, Literal

from .._internal.errors import warn_once

SIGNALS: Final = ("SIGTERM", "SIGINT")
_MARK: Final = "_chronicle_flush_handler"

_state = threading.local()

Ending = Literal["exit", "server", "interrupt", "ignored"]
"""How a stop signal goes on after the flush: the default action ends the process now (``exit``); a server's
handler shuts down gracefully and may end the process later by the default action, skipping ``atexit``
(``server``); ``KeyboardInterrupt`` is raised, so ``atexit`` runs (``interrupt``); nothing happens (``ignored``)."""


def ending(previous: Any) -> Ending:
    """How the signal goes on when ``previous`` is the handler chronicle's handler chains."""
    if callable(previous):
        return "interrupt" if previous is signal.default_int_handler else "server"
    return "ignored" if previous == signal.SIG_IGN else "exit"


def installed(sig: int) -> bool:
    """True when chronicle's handler is the current handler of ``sig``."""
    return bool(getattr(signal.getsignal(sig), _MARK, False))


def install(flush: Callable[[Ending], None]) -> bool:
    """Put a flushing handler in front of each signal's handler (once); False when not on the main thread.

    ``flush(how)`` is called on delivery, with how the signal goes on (:data:`Ending`), so the pipeline can stop
    its uploader when the process ends next, or keep exporting while a server drains its requests.
    """
    if threading.current_thread() is not threading.main_thread():
        warn_once(
            "signals-thread",
            "chronicle_otel: configure() ran outside the main thread, so spans are not flushed on SIGTERM/SIGINT "
            "(only at exit); call configure() from the main thread or flush in your shutdown hook",
        )
        return False
    for name in SIGNALS:
        sig = getattr(signal, name, None)
        if sig is None:
            continue
        try:
            previous = signal.getsignal(sig)
        except (OSError, ValueError):  # pragma: no cover - platform without this signal
            continue
        if getattr(previous, _MARK, False):
            continue
        try:
            signal.signal(sig, _handler(previous, flush))
        except (OSError, ValueError, RuntimeError) as exc:  # pragma: no cover - refused by the platform
            warn_once(f"signals-{name}", "chronicle_otel: cannot handle %s (%s); spans are flushed at exit", name, exc)
    return True


def uninstall() -> None:
    """Put back the handlers chronicle's handlers were installed in front of."""
    if threading.current_thread() is not threading.main_thread():
        return
    for name in SIGNALS:
        sig = getattr(signal, name, None)
        if sig is None:
            continue
        current = signal.getsignal(sig)
        if getattr(current, _MARK, False):
            signal.signal(sig, current._chronicle_previous)  # type: ignore[union-attr]


def _handler(previous: Any, flush: Callable[[Ending], None]) -> Callable[[int, FrameType | None], Any]:
    how = ending(previous)

    def handle(signum: int, frame: FrameType | None) -> Any:
        if not getattr(_state, "busy", False):  # a second signal during the flush goes straight on
            _state.busy = True
            try:
                flush(how)
            except Exception as exc:  # never let telemetry change how the signal ends the process
                warn_once("signals-flush", "chronicle_otel: flushing on a signal failed: %r", exc)
            finally:
                _state.busy = False
        if callable(previous):
            return previous(signum, frame)
        if previous == signal.SIG_IGN:
            return None
        signal.signal(signum, signal.SIG_DFL)
        signal.raise_signal(signum)
        return None

    setattr(handle, _MARK, True)
    handle._chronicle_previous = previous  # type: ignore[attr-defined]
    return handle
