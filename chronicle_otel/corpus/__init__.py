"""Replay a corpus of recorded traces against the code as it is now: one pytest test per trace.

Usage::

    pytest --chronicle-corpus .chronicle --chronicle-failed --chronicle-since 24h -n auto
    chronicle replay-all .chronicle --failed --since 24h

A recorded success must replay as recorded; a recorded failure is fixed when the check says so (``--chronicle-check
module:function`` or a ``pytest_chronicle_corpus_check`` hook in ``conftest.py``; by default, when the root no longer
raises).
After the tests a table says how many traces are fixed, still failing, diverged, newly broken or unreplayable.

API:
    :class:`Corpus`, :class:`CorpusEntry`, :class:`CorpusFilter` — the traces of a source.
    :func:`replay_for_corpus`, :class:`CorpusResult`, :class:`CorpusOutcome` — one trace replayed and judged.
"""

from __future__ import annotations

from ._outcome import CorpusOutcome, CorpusResult, replay_for_corpus
from ._source import Corpus, CorpusEntry, CorpusFilter

__all__ = ["Corpus", "CorpusEntry", "CorpusFilter", "CorpusOutcome", "CorpusResult", "replay_for_corpus"]
