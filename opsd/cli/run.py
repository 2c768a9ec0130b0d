"""`opsd run CONFIG.yaml`: run the pipelines of a config file until SIGTERM (see `opsd.runtime.daemon`)."""

from __future__ import annotations

import argparse
import typing

from opsd.cli.common import CliError
from opsd.config.claims import ClaimError
from opsd.config.load import ConfigError
from opsd.config.models import PythonLevel
from opsd.config.reference import MARKDOWN_PATH, config_reference
from opsd.telemetry.http import PortInUseError

#: The levels `--log-level` takes: those of the config's `logging.level`.
LEVELS = typing.get_args(typing.get_args(PythonLevel)[0])


def add_parser(subparsers: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    run = subparsers.add_parser(
        "run", help="run the pipelines of a config file until SIGTERM",
        description="Run the pipelines of a config file until SIGTERM or Ctrl-C, then stop them gracefully.",
        epilog="The config file (YAML), key by key with defaults:\n\n" + config_reference()
               + f"\n\nWith types, as one table: {MARKDOWN_PATH}; examples: examples/configs/ (in the repository).")
    run.add_argument("config", help="opsd YAML config file; its keys are listed below")
    run.add_argument("--log-level", choices=LEVELS, type=str.upper, default=None,
                     help="opsd's log level over the config's logging.level; DEBUG adds a failure's whole trace "
                          "(Spark's Java stack, the Python traceback) after its one query_failed line")
    run.add_argument("--check", action="store_true",
                     help="check the config and each pipeline (queue, consumer, checkpoint and whether it can resume: "
                          "desync, trim; functions, sink table and schema) without starting any query; exit 1 on a "
                          "problem, naming its fix")
    run.set_defaults(handler=run_command)


def run_command(args: argparse.Namespace) -> int:
    from opsd.runtime.daemon import check, run
    from opsd.telemetry.logs import configure_logging

    configure_logging("WARNING" if args.check else "INFO")
    try:
        return check(args.config) if args.check else run(args.config, log_level=args.log_level)
    except (ConfigError, ClaimError) as e:
        raise CliError(str(e)) from None
    except PortInUseError as e:
        raise CliError(f"{e}: set http.port in {args.config} (0 = any free port)") from None
