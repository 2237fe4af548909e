"""A stub's answer as the report sees it: placeholders and undecodable recordings found, overrides listed,
cancellations awaited.

A stub never answers with a placeholder silently: the classes a recorded value holds that may not be rebuilt here
are found in the decoded answer (:func:`unresolved`) and reported with what to do about them.
"""

from __future__ import annotations

import asyncio
import inspect
import sys
from collections.abc import Callable
from typing import Any, Final

from .._internal.unreplayable import classes_in
from ..codec import UnresolvedObject
from ..errors import CodecError, ReplayDivergence, ReplayError
from ..model import Boundary, ReplayedError
from ._compare import describe
from ._options import ReplayOptions
from ._report import Finding, FindingKind, ReplayReport, short_repr
from ._stubs import CANCELLED, Answer, ends_iteration, override_answer

UNRECORDED: Final = "(not recorded) "
"""Marks the class name of a placeholder for a value that was never recorded (``unencodable``: only its repr)."""


class NotCancelled(ReplayDivergence):
    """A stub that waited to be cancelled, as its recording was, and was not (already in the report)."""


class Answers:
    """Wraps the answers of a replay's stubs so that what they hand the code is reported.

    Args:
        report: the replay's report.
        options: the replay's options (``allow=`` given or not decides the section and the advice).
    """

    def __init__(self, report: ReplayReport, options: ReplayOptions) -> None:
        self._report = report
        self._options = options

    def checked(self, rec: Boundary, answer: Answer) -> Answer:
        """``answer``, and a divergence when it holds a recorded object that could not be rebuilt (the stub would
        hand the code a placeholder where it expects the class: an ``isinstance`` takes the other branch), or when
        the recording cannot answer at all (a payload cut or changed, a class that refuses the recorded data): the
        error reaches the code, which may catch it, and the report says so."""
        text = rec.raw_error.text if rec.failed and rec.raw_error is not None else None
        if text is None and rec.raw_output is not None:
            text = rec.raw_output.text
        output, error = rec.raw_output, rec.raw_error
        whole = (output is None or output.complete) and (error is None or error.complete)
        if text is None:
            return answer
        # a payload without a type tag holds no placeholder (memchr first); it may still not decode
        plain = whole and not rec.failed and ("$" not in text or '"$type":' not in text)

        def checked() -> tuple[Any, BaseException | None]:
            try:
                output, error = answer()
            except (ReplayError, CodecError) as exc:
                self._report.divergences.append(
                    Finding(FindingKind.UNDECODABLE, rec.call_key, f"the stub cannot answer: {exc}")
                )
                raise
            if plain:
                return output, error
            names = unresolved(output, set()) if error is None or rec.stream else set()
            for payload in (rec.raw_output, rec.raw_error):  # placeholders inside rebuilt objects too
                if payload is not None and "unencodable" in payload.text:
                    names.update(UNRECORDED + c for c in classes_in(payload.text.encode()))
            if isinstance(error, ReplayedError):
                names.add(error.type_name)
            if names:
                self._unresolved(rec, names)
            return output, error

        return checked

    def _unresolved(self, rec: Boundary, names: set[str]) -> None:
        listed = ", ".join(sorted(n.removeprefix(UNRECORDED) for n in names)[:5])
        never = sorted(n for n in names if _never_rebuilt(n))
        unrecorded = sorted(n.removeprefix(UNRECORDED) for n in names if n.startswith(UNRECORDED))
        stops = sorted(n for n in names if ends_iteration(n))
        if unrecorded:
            advice = (
                f"{', '.join(unrecorded[:5])} was never recorded (only its text was kept: it could not be encoded, "
                "or it came past what one stream keeps); select the boundary live, or override it (override=)"
            )
        elif stops:
            advice = (
                f"{', '.join(stops[:5])} is never rebuilt (raised by a stub it would end the caller's iteration "
                "silently: map(), next(), a for loop): the stub raises a ReplayedError in its place; select the "
                "boundary live, or override it (override=)"
            )
        elif never:
            advice = (
                f"{', '.join(never[:5])} is never rebuilt (a BaseException that is not an Exception): the stub raises "
                "a ReplayedError in its place; select the boundary live, or override it (override=)"
            )
        else:
            tops = {n.rsplit(".", 1)[0].split(".")[0] for n in names}
            stdlib = sorted(t for t in tops if t in sys.stdlib_module_names or t == "builtins")
            modules = sorted(f"{t}." for t in tops - set(stdlib))
            hint = f"pass allow={modules!r}" if self._options.allow is None else f"add {modules!r} to allow="
            advice = f"import the module that defines it, or {hint}" if modules else ""
            if stdlib:  # os.system, subprocess.Popen: not values a boundary returns; never allow them
                advice += ("; " if advice else "") + (
                    f"a class of {', '.join(stdlib)} (standard library) is not a value chronicle records: the trace "
                    "was probably edited; do not allow it"
                )
        # under the default allow-list a divergence; with allow= given, the placeholders were asked for
        findings = self._report.divergences if self._options.allow is None else self._report.drift
        findings.append(
            Finding(
                FindingKind.UNRESOLVED,
                rec.call_key,
                f"the recording holds {listed}, which may not be rebuilt here: the stub answers with a placeholder; "
                + advice,
            )
        )

    def overridden(self, rec: Boundary, text: str, value: Any, allow: tuple[str, ...]) -> Answer:
        """The what-if answer of ``rec``, listed in the report when it is given."""
        answer = override_answer(rec, allow, value)

        def listed() -> tuple[Any, BaseException | None]:
            output, error = answer()
            try:
                recorded = rec.decode_error(allow) if rec.failed and not rec.stream else rec.decode_output(allow)
                was = f"recorded {'raises ' if rec.failed and not rec.stream else ''}{short_repr(recorded)}"
            except ReplayError:
                was = f"recorded {describe(rec)}"
            now = f"now raises {short_repr(error)}" if error is not None else f"now {short_repr(output)}"
            if output is not None and error is not None:  # a stream's items, then its error
                now = f"now {short_repr(output)}, then raises {short_repr(error)}"
            self._report.overrides.append(
                Finding(FindingKind.OVERRIDE, rec.call_key, f"answered by override {text!r}", (was, now))
            )
            return output, error

        return listed

    def awaiting_cancellation(self, rec: Boundary) -> Callable[..., Any]:
        """The stub of an async call (or the end of a stream) its caller cancelled (a timeout around it, a task
        group): it waits to be cancelled again, so the caller's timeout or task group takes the branch it took; a
        divergence when nothing cancels it within twice the recorded time and a second."""
        recorded = max(rec.end_ns - rec.start_ns, 0) / 1e9
        limit = 2 * recorded + 1.0

        async def cancelled(*args: Any, **kwargs: Any) -> Any:
            await asyncio.sleep(limit)  # the CancelledError of the caller's timeout arrives here, as it did
            finding = Finding(
                FindingKind.NOT_CANCELLED,
                rec.call_key,
                f"the recorded call was cancelled by its caller after {recorded:.3g} s; nothing cancelled it in the "
                f"replay within {limit:.3g} s",
            )
            self._report.divergences.append(finding)
            raise NotCancelled(str(finding))

        return cancelled


def _never_rebuilt(name: str) -> bool:
    """Whether the class ``name`` is a ``BaseException`` that is no ``Exception`` (never rebuilt), as far as the
    modules already imported say: nothing is imported to find out."""
    if name in CANCELLED:
        return True
    module, _, qualname = name.rpartition(".")
    found: Any = sys.modules.get(module)
    for part in qualname.split(".") if found is not None else ():
        found = inspect.getattr_static(found, part, None)
    return isinstance(found, type) and issubclass(found, BaseException) and not issubclass(found, Exception)


_MAX_WALKED: Final = 100_000
"""Objects :func:`unresolved` looks at in one answer, at most."""


def unresolved(value: Any, found: set[str], depth: int = 0, budget: list[int] | None = None) -> set[str]:
    """The class names of the placeholders in a decoded value, inside containers and inside the objects the stub
    rebuilt (their instance dictionaries and slots: a pydantic model, a dataclass), with :data:`UNRECORDED` before
    those never recorded."""
    left = [_MAX_WALKED] if budget is None else budget
    left[0] -= 1
    if left[0] < 0:
        return found
    cls = type(value)
    if cls is UnresolvedObject:
        found.add(UNRECORDED + value.class_name if value.tag == "unencodable" else value.class_name)
    elif depth >= 64 or cls in _SCALARS:
        pass
    elif cls is dict:
        for v in value.values():
            unresolved(v, found, depth + 1, left)
    elif cls in (list, tuple, set, frozenset):
        for v in value:
            unresolved(v, found, depth + 1, left)
    else:
        for v in _attributes(value):
            unresolved(v, found, depth + 1, left)
    return found


_SCALARS: Final = frozenset({str, int, float, bool, bytes, type(None)})


def _attributes(value: Any) -> list[Any]:
    """The values an object holds in its instance dictionary, its pydantic extras and its slots (read without
    running the class's own ``__getattr__``); a container subclass's items."""
    out: list[Any] = []
    if isinstance(value, (dict, list, tuple, set, frozenset)):
        out.extend(value.values() if isinstance(value, dict) else value)
    try:
        namespace = object.__getattribute__(value, "__dict__")
    except AttributeError:
        namespace = None
    if type(namespace) is dict:
        out.extend(namespace.values())
    for name in ("__pydantic_extra__", "__pydantic_private__"):
        try:
            extra = object.__getattribute__(value, name)
        except AttributeError:
            continue
        if type(extra) is dict:
            out.extend(extra.values())
    for klass in type(value).__mro__:
        for slot in klass.__dict__.get("__slots__", ()) if isinstance(klass.__dict__.get("__slots__"), tuple) else ():
            try:
                out.append(object.__getattribute__(value, slot))
            except (AttributeError, TypeError):
                continue
    return out
