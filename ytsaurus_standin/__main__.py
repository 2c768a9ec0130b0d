"""`python -m ytsaurus_standin ROOT [--port N] [--proxies N] [--token-env VAR] [--auto-trim-seconds S]`: the
stand-in as a process of its own (with `--auto-trim-seconds`, trimming queues by their `@auto_trim_config`).

Prints `yt://127.0.0.1:PORT` (the balancer's) once it serves, then serves until SIGTERM or SIGINT. A process of its
own lets a bench count the stand-in's CPU apart from the client's; the token, when one is required, comes from an
environment variable so that it never appears on a command line.
"""

from __future__ import annotations

import argparse
import os
import signal
import threading

from . import PROXIES, StandinProxy


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m ytsaurus_standin")
    parser.add_argument("root", help="the embedded cluster the stand-in serves")
    parser.add_argument("--port", type=int, default=0, help="the balancer's port")
    parser.add_argument("--proxies", type=int, default=PROXIES, help="proxies behind the balancer")
    parser.add_argument("--token-env", help="require the token held by this environment variable")
    parser.add_argument("--auto-trim-seconds", type=float,
                        help="trim queues by their @auto_trim_config every this many seconds, as a Queue Agent does")
    args = parser.parse_args()
    stop = threading.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: stop.set())
    token = os.environ[args.token_env] if args.token_env else None
    with StandinProxy(args.root, port=args.port, token=token, auto_trim_seconds=args.auto_trim_seconds,
                      proxies=args.proxies) as proxy:
        print(proxy.uri, flush=True)
        stop.wait()


if __name__ == "__main__":
    main()
