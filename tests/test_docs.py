"""The README documents every option and Spark conf key that `streaming_core.options` defines."""

from pathlib import Path

import pytest

from streaming_core import options

README = (Path(__file__).parent.parent / "README.md").read_text()
DOCUMENTED = sorted(
    (options._SOURCE_KEYS | options._SINK_KEYS | set(options.SESSION_CONF_KEYS))
    - {options.CHECKPOINT_LOCATION, options.QUERY_NAME}  # set by Spark, not by users
)


@pytest.mark.parametrize("name", DOCUMENTED)
def test_readme_documents_option(name: str) -> None:
    assert f"`{name}`" in README
