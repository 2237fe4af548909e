"""Integrations with the LLM SDKs agents call: one call switches recording on for every client of the SDK.

* :mod:`chronicle_otel.integrations.openai` — ``chat.completions.create`` / ``parse`` and ``responses.create`` /
  ``parse``, sync and async, plain and ``stream=True`` (``pip install 'chronicle-otel[openai]'``);
* :mod:`chronicle_otel.integrations.anthropic` — ``messages.create`` / ``parse`` / ``stream``, sync and async
  (``pip install 'chronicle-otel[anthropic]'``).

Both are built on :func:`chronicle_otel.instrument` with the adapters of :mod:`chronicle_otel.adapters`; the SDKs
are imported only when an integration is switched on.
"""

from __future__ import annotations

__all__ = ["anthropic", "openai"]
