"""The HTML document of ``chronicle view``: the page's data inline and inert, the style and script allowed by hash.

Nothing of the trace becomes markup here: the title is escaped, and the data goes into a
``<script type="application/json">`` block as JSON that cannot end the element (:func:`_json_for_script`).
"""

from __future__ import annotations

import base64
import hashlib
import html
import json
from importlib import resources
from typing import Final

from ...model import Trace
from ...replaying import ReplayReport
from ._data import page_data
from ._readable import CONTROL


def render_html(trace: Trace, report: ReplayReport | None = None) -> str:
    """The self-contained HTML page of ``trace`` (and of a replay report of it).

    Args:
        trace: the trace to show.
        report: a replay report of it, shown in its own panel and beside the boundaries it names.

    Returns:
        The whole page: one HTML document with its style, script and data inline.
    """
    data = page_data(trace, report)
    style, script = _asset("view.css"), _asset("view.js")
    policy = (
        "default-src 'none'; "
        f"script-src '{_sha256(script)}'; "
        f"style-src '{_sha256(style)}'; "
        "img-src data:; base-uri 'none'; form-action 'none'; "
        "require-trusted-types-for 'script'; trusted-types 'none'"
    )
    name = CONTROL.sub("?", trace.root.name[:80]) if trace.root else "trace"
    title = f"chronicle · {name} · {trace.trace_id[:8]}".encode("utf-8", "replace").decode("utf-8")
    return (
        "<!DOCTYPE html>\n"
        '<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        f'<meta http-equiv="Content-Security-Policy" content="{html.escape(policy, quote=False)}">\n'
        '<meta name="referrer" content="no-referrer">\n'
        '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
        '<meta name="generator" content="chronicle view">\n'
        '<link rel="icon" href="data:,">\n'
        f"<title>{html.escape(title)}</title>\n"
        f"<style>{style}</style>\n"
        "</head>\n<body>\n"
        f"{_BODY}"
        f'<script type="application/json" id="chronicle-data">{_json_for_script(data)}</script>\n'
        f"<script>{script}</script>\n"
        "</body>\n</html>\n"
    )


_BODY: Final = """\
<noscript><p class="noscript">This page shows the trace with JavaScript, which is switched off.</p></noscript>
<header id="head"></header>
<section id="panels"></section>
<main id="app">
<nav id="side" aria-label="Boundaries">
<div class="searchbar"><input id="search" type="search" placeholder="Search names and payloads  ( / )"
 aria-label="Search boundaries by name and payload text" autocomplete="off" spellcheck="false">
<span id="matches" aria-live="polite"></span></div>
<div id="tree" role="tree" aria-label="Boundary tree"></div>
</nav>
<div id="content">
<section id="timeline" aria-label="Timeline"></section>
<section id="details" aria-label="Selected boundary"></section>
</div>
</main>
<footer id="foot"></footer>
"""


def _asset(name: str) -> str:
    return resources.files(__package__ or "chronicle_otel.cli._view").joinpath(name).read_text(encoding="utf-8")


def _sha256(text: str) -> str:
    return "sha256-" + base64.b64encode(hashlib.sha256(text.encode("utf-8")).digest()).decode("ascii")


def _json_for_script(data: object) -> str:
    """``data`` as JSON that is inert inside a ``<script>`` element.

    ``ensure_ascii`` writes every non-ASCII character as an escape (U+2028/U+2029, lone surrogates included);
    ``<``, ``>`` and ``&`` become escapes too, so no ``</script>``, ``<!--`` or character reference can appear.
    """
    text = json.dumps(data, ensure_ascii=True, separators=(",", ":"), allow_nan=False)
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
