"""LlamaIndex's tests run in their own virtualenv (``make test-llamaindex``: its OpenAI LLM needs openai<3).

In a virtualenv without LlamaIndex this folder is not collected, so ``pytest tests/frameworks`` still runs there.
"""

from __future__ import annotations

import importlib.util


def _installed(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except ImportError:  # the parent package is missing
        return False


collect_ignore_glob = [] if _installed("llama_index.llms.openai") else ["*.py"]
