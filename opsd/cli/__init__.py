"""The `opsd` command line: one module per command group, wired together in `opsd.cli.main`."""

from opsd.cli.main import main

__all__ = ["main"]
