"""Another opsd holding a config's claims: a child process that takes them and keeps them until it is killed."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

_HOLD = """
import sys
from opsd.config.claims import claimed
from opsd.config.load import load_config
with claimed(load_config(sys.argv[1]), sys.argv[1]):
    print("held", flush=True)
    sys.stdin.read()
"""


def start_holder(config: Path) -> subprocess.Popen[str]:
    """A process holding the claims of `config`, started and holding them (the caller kills it)."""
    process = subprocess.Popen([sys.executable, "-c", _HOLD, str(config)], stdin=subprocess.PIPE,
                               stdout=subprocess.PIPE, text=True, env={**os.environ, "PYTHONPATH": os.getcwd()})
    assert process.stdout is not None and process.stdout.readline() == "held\n"
    return process
