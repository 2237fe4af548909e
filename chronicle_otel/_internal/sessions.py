"""Session variables as typed on a command line: ``--where session.KEY=VALUE``."""

from __future__ import annotations

from typing import Any


def session_matches(session: dict[str, Any], key: str, value: str) -> bool:
    """True when the recorded session variable ``key`` reads as ``value`` (``true``/``True`` for a bool, ``3`` for 3).

    A list value matches when one of its items does.
    """
    if key not in session:
        return False
    recorded = session[key]
    values = recorded if isinstance(recorded, (list, tuple)) else [recorded]
    for item in values:
        if isinstance(item, bool):
            if value.strip().lower() == str(item).lower():
                return True
        elif str(item) == value:
            return True
    return False
