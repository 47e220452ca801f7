#!/usr/bin/env python3
"""Watch webhook events locally: a receiver on 127.0.0.1 that prints each event it gets and
answers 204. With `--secret` (the `whsec_…` the registration answered) it verifies each
signature with the `standardwebhooks` package and prints whether it holds.

    .venv/bin/python scripts/webhook_receiver.py --port 9000 [--secret whsec_...]

Register it with `POST /v2/orgs/{orgId}/serenity/webhooks {"url": "http://127.0.0.1:9000/"}`
(`./scripts/run` runs with DEBUG on, which allows private addresses, and prints the
command).
"""

from __future__ import annotations

import argparse
import json
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--port", type=int, default=9000)
    parser.add_argument("--secret", default="")
    args = parser.parse_args()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            check = ""
            if args.secret:
                from standardwebhooks.webhooks import Webhook

                headers = {k.lower(): v for k, v in self.headers.items()}
                try:
                    Webhook(args.secret).verify(body, headers)
                    check = " signature ok"
                except Exception as exc:
                    check = f" SIGNATURE REFUSED ({exc})"
            print(f"webhook-id {self.headers.get('webhook-id')}{check}", flush=True)
            print(json.dumps(json.loads(body or b"null"), indent=2), flush=True)
            self.send_response(204)
            self.end_headers()

        def log_message(self, format: str, *log_args: object) -> None:
            pass

    print(f"listening on http://127.0.0.1:{args.port}/ (Ctrl-C to stop)", flush=True)
    ThreadingHTTPServer(("127.0.0.1", args.port), Handler).serve_forever()


if __name__ == "__main__":
    main()
