"""reports/README.html: the report as one self-contained web page, for readers without a Markdown viewer.

The Markdown of ``readme.render_readme`` is rendered with markdown-it (CommonMark plus tables); every image
is inlined as a ``data:`` URI, so the page shows every figure wherever the file is copied. Links to the
report's files (CSVs, the theory stage's figures) stay relative, as in the Markdown: they resolve next to
the page in ``reports/``. Headings carry GitHub's anchors (``slug``), so the report's contents links work
in both renderings.
"""

from __future__ import annotations

import base64
import html
import mimetypes
import re
from pathlib import Path
from typing import Sequence

STYLE = """
body { font-family: system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; line-height: 1.45; color: #1f2328;
       max-width: 1180px; margin: 0 auto; padding: 1.5rem 2rem 4rem; }
h1 { font-size: 1.7rem; border-bottom: 1px solid #d0d7de; padding-bottom: .3rem; }
h2 { font-size: 1.35rem; border-bottom: 1px solid #d0d7de; padding-bottom: .25rem; margin-top: 2.2rem; }
h3 { font-size: 1.1rem; }
table { border-collapse: collapse; margin: .8rem 0; font-size: .85rem; display: block; overflow-x: auto; }
th, td { border: 1px solid #d0d7de; padding: .25rem .5rem; vertical-align: top; }
th { background: #f6f8fa; }
tr:nth-child(2n) td { background: #fbfcfd; }
img { max-width: 100%; height: auto; }
td img { max-width: 360px; }
code { background: #f6f8fa; padding: .1rem .3rem; border-radius: 4px; font-size: .85em; }
pre code { display: block; padding: .8rem; overflow-x: auto; }
blockquote { color: #57606a; border-left: .25rem solid #d0d7de; margin: 0; padding: 0 1rem; }
a { color: #0969da; }
"""


def slug(text: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces as hyphens."""
    return re.sub(r"[^\w\- ]", "", text.strip().lower()).replace(" ", "-")


def render_html(markdown: str, assets: Sequence[Path]) -> str:
    """The page for ``markdown``: each image read from the first folder of ``assets`` that holds its
    relative path and inlined; raises FileNotFoundError naming an image that is in none of them."""
    from markdown_it import MarkdownIt

    parser = MarkdownIt("commonmark", {"html": False}).enable("table")
    tokens = parser.parse(markdown)
    _anchor_headings(tokens)
    _inline_images(tokens, [Path(folder) for folder in assets])
    body = parser.renderer.render(tokens, parser.options, {})
    title = next((line[2:].strip() for line in markdown.splitlines() if line.startswith("# ")), "Report")
    return ("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
            "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
            f"<title>{html.escape(title)}</title>\n<style>{STYLE}</style>\n</head>\n<body>\n{body}</body>\n</html>\n")


def _anchor_headings(tokens: list) -> None:
    seen: dict[str, int] = {}
    for opening, inline in zip(tokens, tokens[1:]):
        if opening.type != "heading_open":
            continue
        text = "".join(child.content for child in inline.children or [] if child.type in ("text", "code_inline"))
        anchor = slug(text)
        count = seen.get(anchor, 0)
        seen[anchor] = count + 1
        opening.attrSet("id", anchor if count == 0 else f"{anchor}-{count}")


def _inline_images(tokens: list, assets: list[Path]) -> None:
    for token in tokens:
        for child in token.children or []:
            if child.type != "image":
                continue
            source = str(child.attrGet("src") or "")
            if source.startswith(("data:", "http://", "https://")):
                continue
            path = next((folder / source for folder in assets if (folder / source).is_file()), None)
            if path is None:
                raise FileNotFoundError(f"{source}: the report shows this image but none of "
                                        f"{[str(folder) for folder in assets]} holds it")
            kind = mimetypes.guess_type(path.name)[0] or "application/octet-stream"
            child.attrSet("src", f"data:{kind};base64,{base64.b64encode(path.read_bytes()).decode('ascii')}")
