"""A real SMTP server for the tests: aiosmtpd writing every message into a maildir.

    python tests/smtp_sink.py --port PORT --maildir DIR [--delay SECONDS]

`--delay` holds each message for that long before accepting it, so that a test can catch a request
of the gateway in flight (graceful shutdown). Prints "ready" once it listens.
"""

import argparse
import asyncio
import mailbox
import signal
import sys

from aiosmtpd.controller import Controller


class SlowMailbox:
    def __init__(self, maildir: str, delay: float):
        self.box = mailbox.Maildir(maildir, create=True)
        self.delay = delay

    async def handle_DATA(self, server, session, envelope):
        if self.delay:
            await asyncio.sleep(self.delay)
        self.box.add(envelope.original_content)
        return "250 Message accepted for delivery"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--maildir", required=True)
    parser.add_argument("--delay", type=float, default=0.0)
    args = parser.parse_args()
    controller = Controller(SlowMailbox(args.maildir, args.delay), hostname="127.0.0.1", port=args.port)
    controller.start()
    print("ready", flush=True)
    signal.sigwait({signal.SIGTERM, signal.SIGINT})
    controller.stop()
    sys.exit(0)


if __name__ == "__main__":
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM, signal.SIGINT})
    main()
