"""Session variables: the context of a run, stamped on every boundary span.

Usage::

    import chronicle_otel as chronicle

    chronicle.configure(session={"build_id": "2026.11.29+g3e1a7c4"})  # process-wide

    with chronicle.session(user_id="u-17", prompt_version="v12"):      # this run only
        run_agent("Sell $1,000 of MSFT")

    @chronicle.session(channel="slack")                                # as a decorator
    def handle(msg): ...

Each boundary span carries ``chronicle.session.<key>`` for every process-wide and contextual
variable; inner sessions override outer ones. Secrets are redacted when the session is entered, with
the rules of the process-wide configuration then (key names such as ``api_key``, value formats such as
``sk-…``): ``session(api_key="sk-…")`` records ``chronicle.session.api_key = "[REDACTED]"``.
Values live in a :mod:`contextvars` variable, so they follow asyncio tasks and
``contextvars.copy_context()`` into threads, and are restored when the block exits, even on error.
"""

from __future__ import annotations

import contextvars
import functools
import inspect
from collections.abc import Callable, Mapping
from types import MappingProxyType, TracebackType
from typing import Any, TypeVar

from .. import semconv
from .._api import publish
from ..config import get_config
from ..redact import Redactor
from .session_attrs import SESSION_ATTRIBUTES, AttributeValue, session_attributes

__all__ = ["current_session", "session"]

_F = TypeVar("_F", bound=Callable[..., Any])


def _active_redactor() -> Redactor | None:
    return get_config().redact


def current_session() -> dict[str, AttributeValue]:
    """The session variables active in this context (without the process-wide ones), unprefixed."""
    n = len(semconv.SESSION_PREFIX)
    return {k[n:]: v for k, v in SESSION_ATTRIBUTES.get().items()}


class session:
    """Set session variables for a block of code or every call of a function.

    Works as a context manager and as a decorator (sync and async functions; a fresh scope per
    call), nests (inner values override outer ones) and is safe across threads and asyncio tasks.

    Args:
        **values: the variables, e.g. ``user_id="u-17", prompt_version="v12"``.

    Raises:
        ValueError: a variable name is empty or has an empty dotted segment.
    """

    def __init__(self, **values: Any) -> None:
        self._values = values
        self._redactor = _active_redactor()
        self._attrs = session_attributes(values, self._redactor)
        self._tokens: list[contextvars.Token[Mapping[str, AttributeValue]]] = []

    def _current(self) -> dict[str, AttributeValue]:
        """The variables as the rules active now redact them: a session made before ``configure()`` (at import)
        follows the rules configured since."""
        redactor = _active_redactor()
        if redactor is not self._redactor:
            self._attrs = session_attributes(self._values, redactor)
            self._redactor = redactor
        return self._attrs

    def __enter__(self) -> session:
        merged = {**SESSION_ATTRIBUTES.get(), **self._current()}
        self._tokens.append(SESSION_ATTRIBUTES.set(MappingProxyType(merged)))
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        SESSION_ATTRIBUTES.reset(self._tokens.pop())

    def __call__(self, func: _F) -> _F:
        """Decorate ``func`` so each call runs inside this session."""

        def scope() -> session:
            fresh = session.__new__(session)
            fresh._attrs = self._current()
            fresh._values = self._values
            fresh._redactor = self._redactor
            fresh._tokens = []
            return fresh

        if inspect.iscoroutinefunction(func):

            @functools.wraps(func)
            async def async_wrapper(*args: Any, **kwargs: Any) -> Any:
                with scope():
                    return await func(*args, **kwargs)

            return async_wrapper  # type: ignore[return-value]

        @functools.wraps(func)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            with scope():
                return func(*args, **kwargs)

        return wrapper  # type: ignore[return-value]


publish(__name__, globals())
