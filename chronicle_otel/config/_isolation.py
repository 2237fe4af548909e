"""``isolated()``: recording in a sandbox while a block runs (a replay), the process-wide configuration set aside."""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

from . import params as p
from ._config import DEFAULT, ChronicleConfig, Isolation
from ._options import StoreOptions
from ._pipeline import Pipeline


@contextlib.contextmanager
def isolated(store: str | os.PathLike[str] | None = None) -> Iterator[Path]:
    """Record in a sandbox while the block runs: no span leaves the process, nothing reaches the real store.

    The process-wide configuration is set aside for the block; boundaries record with the same settings
    (redaction, capture, session) into ``store`` (default: a temporary directory, deleted after the block)
    through a private TracerProvider with no exporter but the store's. A ``configure()`` called inside the block
    (a module imported by a replayed test configures at import) is sandboxed the same way: no OTLP exporter, the
    global provider untouched, the store redirected, payloads kept local, no signal handlers. After the block the
    configuration that was active before is back. Replays run isolated by default (``replay(..., isolate=False)``
    to record into the real pipeline). Nested blocks share the outer one's store.

    Spans your own code sends through a TracerProvider it set up itself are not chronicle's to stop.

    Yields:
        The store directory the block records into.
    """
    with DEFAULT.lock:
        current = DEFAULT.isolation
        if current is not None:
            current.depth += 1
        else:
            temporary = store is None
            path = Path(tempfile.mkdtemp(prefix="chronicle-replay-")) if store is None else Path(store)
            current = DEFAULT.isolation = Isolation(path, temporary, DEFAULT.config)
            saved = current.saved
            settings = saved._settings if saved is not None else p.resolve_settings(strict=False)
            if settings.enabled:
                pipeline = Pipeline.build(
                    tracer_provider=None,
                    reuse=None,
                    use_global=False,
                    service_name=settings.service_name,
                    store=p.resolve_store(StoreOptions(path=path, processor="batch", durable=False, compress=False)),
                    otlp=False,
                )
                pipeline.start()
            else:
                pipeline = Pipeline()
            DEFAULT.config = ChronicleConfig(settings, pipeline)
    try:
        yield current.store
    finally:
        with DEFAULT.lock:
            current.depth -= 1
            done = current.depth == 0
            if done:
                sandbox, DEFAULT.config = DEFAULT.config, current.saved
                DEFAULT.isolation = None
        if done:
            if sandbox is not None and sandbox is not current.saved:
                sandbox.shutdown()
            if current.temporary:
                shutil.rmtree(current.store, ignore_errors=True)


def is_isolated() -> bool:
    """True while an :func:`isolated` block (a replay) runs."""
    return DEFAULT.isolation is not None
