"""The documentation: every option and Spark conf key that `streaming_core.options` defines is documented in the
pages the README links; the README is a front page (under 15,000 characters) whose links all lead somewhere."""

import re
from pathlib import Path

import pytest

from streaming_core import options

ROOT = Path(__file__).parent.parent
README = (ROOT / "README.md").read_text()
#: What users read: the front page and the pages under docs/.
DOCS = README + "".join(page.read_text() for page in sorted((ROOT / "docs").glob("*.md")))
#: The front page's budget: what it is, the two commands, a first pipeline, where to go next.
FRONT_PAGE_CHARACTERS = 15_000
DOCUMENTED = sorted(
    (options._SOURCE_KEYS | options._SINK_KEYS | set(options.SESSION_CONF_KEYS))
    - {options.CHECKPOINT_LOCATION, options.QUERY_NAME}  # set by Spark, not by users
)


@pytest.mark.parametrize("name", DOCUMENTED)
def test_the_docs_document_option(name: str) -> None:
    assert f"`{name}`" in DOCS


def test_the_readme_is_a_front_page() -> None:
    assert len(README) < FRONT_PAGE_CHARACTERS
    assert "make demo" in README and "make test" in README


@pytest.mark.parametrize("page", sorted([ROOT / "README.md", *(ROOT / "docs").glob("*.md")]), ids=lambda p: p.name)
def test_every_relative_link_leads_to_a_file_and_its_anchor(page: Path) -> None:
    broken = []
    for target in re.findall(r"\]\(([^)\s]+)\)", page.read_text()):
        if target.startswith(("http://", "https://")):
            continue
        file, _, anchor = target.partition("#")
        linked = (page.parent / file).resolve() if file else page
        missing_anchor = anchor and linked.is_file() and anchor not in _anchors(linked.read_text())
        if not linked.exists() or missing_anchor:
            broken.append(target)
    assert broken == []


def _anchors(markdown: str) -> set[str]:
    """GitHub's heading anchors: lower case, punctuation dropped, spaces as hyphens."""
    return {re.sub(r"[^a-z0-9 _-]", "", heading.strip().lower()).replace(" ", "-")
            for heading in re.findall(r"^#+ (.+)$", markdown, flags=re.MULTILINE)}
