"""The version of the installed distribution (`streaming_core.__version__`, `opsd.__version__`), read from its metadata:
pyproject.toml is the one source."""

from importlib import metadata


def distribution_version(name: str) -> str:
    """The installed version of distribution `name`, without importing it; "unknown" when not installed."""
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return "unknown"


#: The distribution that holds both packages.
DISTRIBUTION = "yt-streaming-opsd"
__version__ = distribution_version(DISTRIBUTION)
