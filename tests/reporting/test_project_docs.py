"""The project README and docs/: short enough to read, the two commands first, the expected-results block
that `dssl readme sync` fills, and no link to a file or heading that does not exist."""

from __future__ import annotations

import re
from pathlib import Path

from dssl.reporting.html import slug
from dssl.reporting.readme import BLOCK_END, BLOCK_START

REPO = Path(__file__).resolve().parents[2]
PAGES = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
LINK = re.compile(r"\]\(([^)\s]+)\)")
GENERATED = ("reports/",)   # written by `make repro`: not in a clean clone


def test_readme_is_short_with_the_two_commands_first_and_one_expected_results_block():
    text = (REPO / "README.md").read_text()
    assert len(text) <= 15_000, f"README.md has {len(text)} characters; move detail to docs/"
    first_section = text.index("\n## ")
    assert "make repro" in text[:first_section] and "make test" in text[:first_section]
    assert text.count(BLOCK_START) == 1 and text.count(BLOCK_END) == 1
    assert text.index(BLOCK_START) < text.index(BLOCK_END)
    for heading in ("## What it reproduces", "## Expected results", "## How to run", "## Where everything else lives"):
        assert heading in text


def test_links_between_the_pages_lead_to_existing_files_and_headings():
    broken = []
    for page in PAGES:
        for target in LINK.findall(page.read_text()):
            if target.startswith(("http://", "https://")) or target.startswith(GENERATED):
                continue
            path, _, anchor = target.partition("#")
            file = (page.parent / path).resolve() if path else page
            if not file.exists():
                broken.append(f"{page.name}: {target}")
            elif anchor and file.suffix == ".md":
                headings = [slug(line.lstrip("#").strip()) for line in file.read_text().splitlines()
                            if line.startswith("#")]
                if anchor not in headings:
                    broken.append(f"{page.name}: {target} (no such heading)")
    assert broken == []
