"""Model and expert text as safe HTML.

A model's thought is untrusted: it may contain HTML or script, by accident or by design.
It is parsed as Markdown with raw HTML disabled (so tags come out as text), and the result
goes through an allow-list sanitiser as a second line of defence, so nothing a model writes
can run in an expert's browser.
"""

from __future__ import annotations

import html
import threading

import bleach
from markdown_it import MarkdownIt

_md = MarkdownIt("commonmark", {"html": False, "linkify": False, "typographer": False}).enable(
    "table"
)

ALLOWED_TAGS = [
    "p", "br", "em", "strong", "code", "pre", "ul", "ol", "li", "blockquote",
    "h1", "h2", "h3", "h4", "h5", "h6", "hr", "a", "table", "thead", "tbody", "tr", "th", "td",
]  # fmt: skip
ALLOWED_ATTRS = {"a": ["href", "title"]}
ALLOWED_PROTOCOLS = ["http", "https", "mailto"]


_local = threading.local()


def _cleaner() -> bleach.Cleaner:
    # Building a Cleaner costs more than cleaning a thought; one per thread (not thread-safe).
    c = getattr(_local, "cleaner", None)
    if c is None:
        c = _local.cleaner = bleach.Cleaner(
            tags=ALLOWED_TAGS, attributes=ALLOWED_ATTRS, protocols=ALLOWED_PROTOCOLS, strip=False
        )
    return c


def render_md(text: str | None) -> str:
    """Markdown `text` as sanitised HTML: formatting kept, every tag or script made inert."""
    if not text:
        return ""
    rendered = _md.render(str(text))
    clean = _cleaner().clean(rendered)
    # Links open elsewhere and carry no referrer; the sanitiser keeps only http(s)/mailto.
    return clean.replace("<a href=", '<a rel="noopener noreferrer nofollow" target="_blank" href=')


def escape(text: object) -> str:
    """Plain text for HTML (ids, survey names, anything that is not Markdown)."""
    return html.escape("" if text is None else str(text), quote=True)
