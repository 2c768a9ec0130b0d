"""The `opsd` command line: a registry of subcommand modules and the one place errors become exit codes.

Each command-group module in `COMMANDS` exposes `add_parser(subparsers, common)`: it adds its (sub)parsers, passing
`parents=[common]` so that every command accepts `--cluster URI`, and sets `handler=<function(args) -> int>`
as a default. Adding a command group is one module plus one entry in `COMMANDS`.

Errors the user can fix — every `ClusterError`, bad input (`CliError`), unreadable files, damaged checkpoint files
(`CheckpointError`) — print `opsd: error: <message>` on stderr and exit 1, without a traceback, secrets masked and
control characters escaped (`opsd.telemetry.terminal`); a path not found also names the cluster that was searched.
Library warnings (the `Yt` logger's retries, the connector's) go through opsd's logging at WARNING. Ctrl-C ends a
command with exit code 130 and no message; any other exception is a bug, printed with its traceback (plain, no local
variables) through the same redaction, exit 1. Output into a pipe closed early (`opsd doctor --json | head`) ends the
command quietly with 141, as a process killed by SIGPIPE. Every parser shows its options' defaults
(`opsd.cli.common.HelpFormatter`).
"""

from __future__ import annotations

import argparse
import os
import sys
import traceback
from collections.abc import Sequence

from opsd.cli import consumer, demo, desync, doctor, history, producer, queue, run, status, table, tuning
from opsd.cli.common import CLUSTER_HELP, CliError, Parser
from opsd.telemetry.logs import configure_logging
from opsd.telemetry.terminal import Shown
from streaming_core.checkpoint import CheckpointError
from streaming_core.cluster import ClusterError, NoSuchPathError
from streaming_core.version import __version__

#: The exit code of a command ended by Ctrl-C (128 + SIGINT), as shells report it.
INTERRUPTED = 130

#: The exit code of a command whose output pipe was closed by its reader (128 + SIGPIPE), as shells report it.
PIPE_CLOSED = 141

#: Subcommand modules, in the order `opsd --help` lists them.
COMMANDS = (queue, consumer, producer, table, run, demo, status, desync, history, doctor, tuning)


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(prog="opsd", description="Operations for Spark streaming over YTsaurus queues.")
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    parser.add_argument("--cluster", metavar="URI", default=None, help=CLUSTER_HELP)
    common = Parser(add_help=False)
    # SUPPRESS: a subcommand's default must not hide `opsd --cluster URI <command>`.
    common.add_argument("--cluster", metavar="URI", default=argparse.SUPPRESS, help=CLUSTER_HELP)
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for module in COMMANDS:
        module.add_parser(subparsers, common)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the `opsd` console script; returns the exit code."""
    args = build_parser().parse_args(argv)
    # Warnings of the libraries a command uses (ytsaurus-client's `Yt` retries, the connector's) in opsd's format and
    # redaction; `opsd run` and `opsd demo` configure their own.
    configure_logging("WARNING")
    try:
        code = args.handler(args)
        sys.stdout.flush()  # inside the try: a reader gone before the last buffered output is a closed pipe too
        return code
    except NoSuchPathError as e:
        searched = getattr(args, "cluster_searched", None)
        return _fail(f"{e} (searched cluster {searched})" if searched else str(e))
    except (ClusterError, CliError, CheckpointError) as e:
        return _fail(str(e))
    except BrokenPipeError:
        # What is still buffered would fail again at exit ("Exception ignored ... BrokenPipeError"): drop it.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return PIPE_CLOSED
    except OSError as e:
        return _fail(f"{e.filename}: {e.strerror}" if e.filename else str(e))
    except KeyboardInterrupt:
        return INTERRUPTED
    except Exception:  # a bug: its traceback is worth reporting, but it leaves through the same redaction
        print(f"opsd: internal error (please report it):\n{Shown().line(traceback.format_exc(), one_line=False)}",
              file=sys.stderr)
        return 1


def _fail(message: str) -> int:
    print(f"opsd: error: {Shown().line(message, one_line=False)}", file=sys.stderr)
    return 1

