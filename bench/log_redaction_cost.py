"""What the log redaction (``platform.logs.RedactFilter``) costs per record, in this process, against what writing the
record costs a handler without it: µs a record, the best of several rounds (the machine's other load only adds).

    PYTHONPATH=. DJANGO_SETTINGS_MODULE=platform.settings .venv/bin/python bench/log_redaction_cost.py [--records 20000]

The records are the hot path's: uvicorn's access line (one per request), the HTTP clients' request line (one per MCP
request, model call and webhook post — with and without credentials in the URL), and a line with nothing to look at.
"URL step" is the part the filter spends masking absolute URLs (``common.endpoints.endpoints_masked_in``).
"""

from __future__ import annotations

import argparse
import io
import logging
import sys
import time
from collections.abc import Callable

from common.endpoints import endpoints_masked_in
from platform.logs import RedactFilter

RECORDS: dict[str, tuple[str, str, tuple[object, ...]]] = {
    "access line": (
        "uvicorn.access",
        '%s - "%s %s HTTP/%s" %d',
        ("127.0.0.1:51234", "POST", "/api/gateway/message", "1.1", 200),
    ),
    "HTTP client line, plain URL": (
        "httpx2",
        'HTTP Request: %s %s "%s %d %s"',
        ("POST", "http://127.0.0.1:8100/mcp", "HTTP/1.1", 200, "OK"),
    ),
    "HTTP client line, URL with credentials": (
        "httpx2",
        'HTTP Request: %s %s "%s %d %s"',
        ("POST", "http://mcpuser:pa55@127.0.0.1:8100/mcp?token=t0k", "HTTP/1.1", 200, "OK"),
    ),
    "nothing to look at": ("django.request", "Not Found: %s", ("/api/nowhere",)),
}


def per_record(count: int, run: Callable[[], None]) -> float:
    started = time.perf_counter()
    for _ in range(count):
        run()
    return (time.perf_counter() - started) / count * 1e6


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--records", type=int, default=20000, help="records per round")
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args(argv)

    redact = RedactFilter()
    handler = logging.StreamHandler(io.StringIO())
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s %(message)s"))
    print(f"{'record':42} {'filter':>8} {'URL step':>9} {'handler':>8}  (µs a record)")
    for name, (logger, msg, record_args) in RECORDS.items():

        def record(logger: str = logger, msg: str = msg, record_args: tuple[object, ...] = record_args):
            return logging.LogRecord(logger, logging.INFO, __file__, 1, msg, record_args, None)

        made = min(per_record(args.records, record) for _ in range(args.rounds))
        filtered = min(per_record(args.records, lambda: redact.filter(record())) for _ in range(args.rounds))
        line = record().getMessage()
        url_step = min(
            per_record(args.records, lambda line=line: endpoints_masked_in(line)) for _ in range(args.rounds)
        )
        written = min(per_record(args.records, lambda: handler.handle(record())) for _ in range(args.rounds))
        print(f"{name:42} {filtered - made:8.2f} {url_step:9.2f} {written - made:8.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
