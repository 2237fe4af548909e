"""The process lifecycle: the process-wide configuration flushed at exit, in forked children and on stop signals.

Spans are flushed at interpreter exit, so no span of a normal run is lost; a ``multiprocessing`` child started by
fork, which ends with ``os._exit`` and skips ``atexit``, flushes through its own exit handlers; and with
``flush_on_signals`` a SIGTERM or SIGINT flushes first (bounded), then takes its course (:mod:`._signals`).
"""

from __future__ import annotations

import atexit
import contextlib
import os
import sys

from . import _signals as signals
from ._config import DEFAULT, Slot

SIGNAL_FLUSH_MILLIS = 5_000
"""How long a flush on SIGTERM/SIGINT may take (a container's grace period is usually 30 s)."""

DRAIN_SECONDS = 30.0
"""How long after a stop signal a server's drained requests are exported as they end (the usual grace period)."""


def register_exit_flush() -> None:
    """Shut the process-wide configuration down at exit, and in a forked child too: once per process.

    The caller holds :data:`DEFAULT`'s lock.
    """
    if not DEFAULT.atexit_registered:
        atexit.register(shutdown_at_exit)
        if hasattr(os, "register_at_fork"):
            os.register_at_fork(after_in_child=_in_forked_child)
        DEFAULT.atexit_registered = True


def install_signal_handlers() -> None:
    """Flush on SIGTERM and SIGINT, in front of the handlers already installed (from the main thread only)."""
    signals.install(flush_on_signal)


def flush_on_signal(how: signals.Ending) -> None:
    """Export what is finished, bounded, when a stop signal arrives.

    When the process ends next, waiting payloads also go to the spool; when a server shuts down gracefully, each
    trace is exported as it ends, for the rest of the shutdown.
    """
    config = DEFAULT.config
    if config is not None:
        config._pipeline.flush_for_exit(
            SIGNAL_FLUSH_MILLIS, final=how == "exit", drain_seconds=DRAIN_SECONDS if how == "server" else 0.0
        )


def shutdown_at_exit() -> None:
    """Flush and stop the process-wide configuration (and the provider, if chronicle created it)."""
    config = DEFAULT.config
    if config is not None:
        config.shutdown()


def _in_forked_child() -> None:
    """Export the spans of a ``multiprocessing`` child started by fork when it exits.

    Such a child ends with ``os._exit``, skipping ``atexit``; its own exit handlers
    (``multiprocessing.util.Finalize``, registered once the child has set itself up) still run.
    """
    if "multiprocessing" in sys.modules and DEFAULT.config is not None:
        with contextlib.suppress(Exception):
            import multiprocessing.util

            multiprocessing.util.register_after_fork(DEFAULT, _finalize_in_child)


def _finalize_in_child(slot: Slot) -> None:
    import multiprocessing.util

    multiprocessing.util.Finalize(None, shutdown_at_exit, exitpriority=0)


def reset_for_tests() -> None:
    """Shut down and forget the process-wide configuration (and put back the signal handlers it chained)."""
    signals.uninstall()
    with DEFAULT.lock:
        config = DEFAULT.config
        DEFAULT.config = None
    if config is not None:
        config.shutdown()
