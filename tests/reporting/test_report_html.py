"""reports/README.html: one self-contained page (figures inlined), checked in a real headless browser."""

from __future__ import annotations

import re
import time

import pytest
from browser import MISSING, broken_links, chromium, page_facts

from dssl.reporting.html import render_html, slug

from report_helpers import build_report


def test_html_inlines_every_image_and_anchors_every_heading(tmp_path):
    (tmp_path / "figures").mkdir()
    (tmp_path / "figures" / "a.png").write_bytes(b"\x89PNG fake")
    page = render_html("# Title\n\n## Table 1: FL (10pct)\n\n![a](figures/a.png) [csv](sections/t.csv) "
                       "[up](#table-1-fl-10pct)\n\n## Table 1: FL (10pct)\n\n| a | b |\n|---|---|\n| 1 | 2 |\n",
                       [tmp_path])
    assert "<title>Title</title>" in page and '<img src="data:image/png;base64,' in page
    assert 'id="table-1-fl-10pct"' in page and 'id="table-1-fl-10pct-1"' in page
    assert '<a href="sections/t.csv">' in page and "<table>" in page
    assert slug("Fig. 2b (DecL): DecMAR against |A|") == "fig-2b-decl-decmar-against-a"
    with pytest.raises(FileNotFoundError, match="missing.png"):
        render_html("![gone](missing.png)", [tmp_path])


def test_html_report_loads_in_chromium_with_every_image_decoded_and_no_broken_link(tmp_path):
    if chromium() is None:
        pytest.skip(MISSING)
    reports = build_report(tmp_path)
    page = reports / "README.html"
    html = page.read_text()
    sources = re.findall(r'<img src="([^"]*)"', html)
    assert sources and all(src.startswith("data:image/png;base64,") for src in sources)   # self-contained
    started = time.perf_counter()
    facts = page_facts(page)
    seconds = time.perf_counter() - started
    assert facts["ready"] == "complete" and facts["title"].startswith("Distributed SSL") and facts["text"] > 1000
    assert len(facts["images"]) == len(sources)
    undecoded = [image["alt"] for image in facts["images"] if not (image["decoded"] and image["width"] > 0)]
    assert undecoded == []
    assert facts["links"] and broken_links(page, facts) == []
    assert facts["errors"] == []
    print(f"Chromium loaded and checked the report in {seconds:.1f} s")
