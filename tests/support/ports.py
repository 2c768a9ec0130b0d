"""Loopback ports for tests: `free_port` (nothing listens on it) and `taken_port` (something does)."""

from __future__ import annotations

import contextlib
import socket
from collections.abc import Iterator


def free_port() -> int:
    """A loopback port nothing listens on (bound, then released): for a server to start on, or to be refused."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@contextlib.contextmanager
def taken_port() -> Iterator[int]:
    """A loopback port held by a listening socket until the block ends."""
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        yield int(holder.getsockname()[1])
