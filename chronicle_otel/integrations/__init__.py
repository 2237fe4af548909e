"""Integrations with the SDKs and agent frameworks agents are built on: one call switches recording on for all of it.

SDKs (every method however it is called: plain, ``stream=True``, ``with_raw_response``, ``with_streaming_response``):

* :mod:`chronicle_otel.integrations.openai` — ``chat.completions.create`` / ``parse``, ``responses.create`` /
  ``parse``, ``beta.responses.create``, sync and async (``pip install 'chronicle-otel[openai]'``);
* :mod:`chronicle_otel.integrations.anthropic` — ``messages.create`` / ``parse`` / ``stream`` and their
  ``beta.messages`` twins, sync and async (``pip install 'chronicle-otel[anthropic]'``).

Agent frameworks, at their own model seam and tool seam (each tool call a boundary named after the tool):

* :mod:`chronicle_otel.integrations.langchain` — LangChain chat models and tools, so LangGraph too (``[langchain]``);
* :mod:`chronicle_otel.integrations.pydantic_ai` — pydantic-ai model requests and function tools (``[pydantic-ai]``);
* :mod:`chronicle_otel.integrations.openai_agents` — the OpenAI Agents SDK's models and function tools
  (``[openai-agents]``);
* :mod:`chronicle_otel.integrations.litellm` — ``litellm.completion`` and its siblings, streams included
  (``[litellm]``);
* :mod:`chronicle_otel.integrations.llama_index` — LlamaIndex LLM calls and function tools (``[llama-index]``).

Each has ``instrument()`` (returns the boundary names, a no-op the second time) and ``uninstrument()``; the library
is imported only when its integration is switched on. With a framework and an SDK integration both on, both record
(the SDK call nested in the framework's) and a replay answers at the outermost stubbed boundary. See
``docs/frameworks.md``.
"""

from __future__ import annotations

__all__ = ["anthropic", "langchain", "litellm", "llama_index", "openai", "openai_agents", "pydantic_ai"]
