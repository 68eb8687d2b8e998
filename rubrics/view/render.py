"""The page: one self-contained HTML document, the same for `--static OUT.html` and for the server.

The data travels as JSON inside a <script type="application/json"> element, written pure ASCII with "<", ">" and
"&" as \\u escapes, so no string in it can close the element or be read as markup; the page's script shows every
string as text. A Content-Security-Policy with a fresh nonce lets only the page's own script and style run and
loads nothing from anywhere: a string that slipped through as markup still could not execute or call out.
"""
from __future__ import annotations

import html
import json
import math
import secrets
from importlib import resources
from typing import Any

from rubrics.view.page_model import ViewData

_JSON_IN_HTML = str.maketrans({"<": "\\u003c", ">": "\\u003e", "&": "\\u0026"})


def asset(name: str) -> str:
    return resources.files("rubrics.view").joinpath("assets", name).read_text(encoding="utf-8")


def data_json(data: ViewData) -> str:
    """The page data as JSON safe inside a script element: ASCII only (bidi and other controls become \\u escapes,
    lone surrogates too), no "<", ">" or "&", and no NaN or infinity (not JSON)."""
    return json.dumps(_finite(data.model_dump(mode="json")), ensure_ascii=True, allow_nan=False,
                      separators=(",", ":")).translate(_JSON_IN_HTML)


def _finite(value: Any) -> Any:
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_finite(v) for v in value]
    return value


def render_page(data: ViewData) -> str:
    nonce = secrets.token_urlsafe(18)
    policy = (f"default-src 'none'; script-src 'nonce-{nonce}'; style-src 'nonce-{nonce}'; img-src data:; "
              "base-uri 'none'; form-action 'none'")
    return "\n".join([
        "<!doctype html>",
        '<html lang="en">',
        "<head>",
        '<meta charset="utf-8">',
        f'<meta http-equiv="Content-Security-Policy" content="{policy}">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        '<meta name="referrer" content="no-referrer">',
        f"<title>{html.escape(_printable(data.title))}</title>",
        f'<style nonce="{nonce}">{asset("view.css")}</style>',
        "</head>",
        "<body>",
        "<noscript>This page is drawn by its script: allow JavaScript to see the results.</noscript>",
        '<div id="app"></div>',
        f'<script type="application/json" id="view-data">{data_json(data)}</script>',
        f'<script nonce="{nonce}">{asset("view.js")}</script>',
        "</body>",
        "</html>",
        "",
    ])


def _printable(text: str) -> str:
    """The title is the one string outside the data: control and format characters (bidirectional overrides
    among them, which str.isprintable refuses) are dropped from it."""
    return "".join(ch for ch in text if ch.isprintable())
