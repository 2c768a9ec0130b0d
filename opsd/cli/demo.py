"""`opsd demo`: the end-to-end demo on an embedded cluster (see `opsd.demo`)."""

from __future__ import annotations

import argparse

from opsd.cli.common import CliError
from opsd.demo.scenario import DemoSettings


def add_parser(subparsers: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    demo = subparsers.add_parser("demo", parents=[common], help="the end-to-end demo on an embedded cluster")
    demo.add_argument("--rate", type=float, default=DemoSettings.rate, help="rows per second produced")
    demo.add_argument("--duration", type=float, default=DemoSettings.duration,
                      help="seconds to produce; 0 = until Ctrl-C")
    demo.add_argument("--partitions", type=int, default=DemoSettings.partitions, help="queue partitions")
    demo.add_argument("--port", type=int, default=DemoSettings.port, help="metrics port; 0 = any free port")
    demo.add_argument("--root", default=DemoSettings.root,
                      help="embedded cluster root, wiped first; logs go to ROOT.log")
    demo.set_defaults(handler=demo_command)


def demo_command(args: argparse.Namespace) -> int:
    from opsd.demo.run import run_demo
    from opsd.telemetry.http import PortInUseError

    if args.rate <= 0 or args.partitions < 1 or args.duration < 0:
        raise CliError("--rate must be > 0, --partitions >= 1 and --duration >= 0")
    try:
        return run_demo(DemoSettings(rate=args.rate, duration=args.duration, partitions=args.partitions,
                                     port=args.port, root=args.root))
    except PortInUseError as e:
        raise CliError(f"{e}: choose another with --port (0 = any free port)") from None
