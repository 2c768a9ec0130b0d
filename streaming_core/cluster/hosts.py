"""Hosts as the cluster URIs name them: whether a proxy is this machine (plain HTTP to it never leaves it)."""

from __future__ import annotations

import ipaddress


def is_loopback(host: str | None) -> bool:
    """Whether `host` is this machine (a name or address on the loopback interface): plain HTTP never leaves it."""
    if host in ("localhost", "localhost.localdomain"):
        return True
    try:
        return ipaddress.ip_address(host or "").is_loopback
    except ValueError:
        return False
