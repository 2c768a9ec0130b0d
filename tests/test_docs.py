"""The README and its `docs/` pages document every option and Spark conf key that `streaming_core.options` defines."""

from pathlib import Path

import pytest

from streaming_core import options

ROOT = Path(__file__).parent.parent
README = (ROOT / "README.md").read_text()
#: The README and the reference pages it links (`docs/*.md`): where an option may be documented.
DOCS = README + "".join(p.read_text() for p in sorted((ROOT / "docs").glob("*.md")))
DOCUMENTED = sorted(
    (options._SOURCE_KEYS | options._SINK_KEYS | set(options.SESSION_CONF_KEYS))
    - {options.CHECKPOINT_LOCATION, options.QUERY_NAME}  # set by Spark, not by users
)


@pytest.mark.parametrize("name", DOCUMENTED)
def test_readme_documents_option(name: str) -> None:
    assert f"`{name}`" in DOCS
