"""A real SMTP server for the tests: aiosmtpd writing every message into a maildir.

    python tests/smtp_sink.py --port PORT --maildir DIR [--delay SECONDS]
        [--tls starttls|implicit --cert PEM --key PEM]

`--delay` holds each message for that long before accepting it, so that a test can catch a request
of the gateway in flight (graceful shutdown). `--tls starttls` refuses mail until the client has
issued STARTTLS; `--tls implicit` speaks TLS from the first byte. Prints "ready" once it listens.
"""

import argparse
import asyncio
import mailbox
import signal
import ssl
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
    parser.add_argument("--tls", choices=["none", "starttls", "implicit"], default="none")
    parser.add_argument("--cert")
    parser.add_argument("--key")
    args = parser.parse_args()
    handler = SlowMailbox(args.maildir, args.delay)
    if args.tls == "none":
        controller = Controller(handler, hostname="127.0.0.1", port=args.port)
    else:
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        context.load_cert_chain(args.cert, args.key)
        if args.tls == "starttls":
            controller = Controller(
                handler, hostname="127.0.0.1", port=args.port, tls_context=context, require_starttls=True
            )
        else:
            controller = Controller(handler, hostname="127.0.0.1", port=args.port, ssl_context=context)
    controller.start()
    print("ready", flush=True)
    signal.sigwait({signal.SIGTERM, signal.SIGINT})
    controller.stop()
    sys.exit(0)


if __name__ == "__main__":
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM, signal.SIGINT})
    main()
