from __future__ import annotations

import asyncio
import inspect
from typing import Any

import pytest

import chronicle_otel as chronicle
from tests.conftest import Recorder


def record(
    recorder: Recorder, fn: Any, *args: Any, raises: type[BaseException] | None = None, **kwargs: Any
) -> chronicle.Trace:
    """Call ``fn`` (awaiting a coroutine), flush, and load the newest trace from the recorder's store.

    ``raises``: the exception the call must raise (it is recorded); any other exception fails the test.
    """

    def call() -> None:
        result = fn(*args, **kwargs)
        if inspect.isawaitable(result):
            asyncio.run(_await(result))

    if raises is None:
        call()
    else:
        with pytest.raises(raises):
            call()
    recorder.config.force_flush()
    return chronicle.load_trace(recorder.store, "latest")


async def _await(awaitable: Any) -> Any:
    return await awaitable
