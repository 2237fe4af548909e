from __future__ import annotations

from typing import Any

import chronicle_otel as chronicle
from tests.conftest import Recorder


def record(recorder: Recorder, fn: Any, *args: Any, **kwargs: Any) -> chronicle.Trace:
    """Call ``fn`` (errors are kept), flush, and load the newest trace from the recorder's store."""
    try:
        result = fn(*args, **kwargs)
        if hasattr(result, "__await__"):
            import asyncio

            asyncio.run(result)
    except Exception:
        pass
    recorder.config.force_flush()
    return chronicle.load_trace(recorder.store, "latest")
