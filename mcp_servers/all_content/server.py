"""A test MCP server that returns every kind of content a tool result may hold, for the platform's conformance tests.

Not a demo domain: its tools return an image, audio, resource links and embedded resources (text and binary), one
has a ``.`` in its name (SEP-986 allows it), one can only run as a background task (``execution.taskSupport:
required``), one reports progress, and two take no required argument. Two copies of it are two servers sharing
every tool name. It serves streamable HTTP with event-stream answers (so progress notifications reach the caller
before the result), or stdio with ``--stdio``.

    python -m mcp_servers.all_content.server [--port 8400] [--stdio]
"""

from __future__ import annotations

import argparse
import base64
import os
import struct
import zlib
from typing import Any

import anyio
import uvicorn
from mcp.server.mcpserver import Context, MCPServer
from mcp_types import (
    AudioContent,
    BlobResourceContents,
    ContentBlock,
    EmbeddedResource,
    ImageContent,
    ResourceLink,
    TextContent,
    TextResourceContents,
    Tool,
    ToolExecution,
)
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from mcp_servers.common import HEALTH_PATH, MCP_PATH, READ_ONLY, log_config

EMBEDDED_TEXT = "Resource 1: This is a plaintext resource about the line's contract."
TASK_ONLY = "research_report"
DOTTED = "files.read"
PROGRESS_STEPS = 3


def png_pixel() -> bytes:
    """A valid 1×1 red PNG."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)

    header = struct.pack(">IIBBBBB", 1, 1, 8, 2, 0, 0, 0)
    pixels = zlib.compress(b"\x00\xff\x00\x00")
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", pixels) + chunk(b"IEND", b"")


def wav_silence(samples: int = 800) -> bytes:
    """A valid WAV of ``samples`` 8-bit mono samples of silence at 8 kHz."""
    data = b"\x80" * samples
    fmt = struct.pack("<HHIIHH", 1, 1, 8000, 8000, 1, 8)
    return (
        b"RIFF"
        + struct.pack("<I", 36 + len(data))
        + b"WAVEfmt "
        + struct.pack("<I", 16)
        + fmt
        + b"data"
        + (struct.pack("<I", len(data)) + data)
    )


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


class AllContentServer(MCPServer):
    """Lists :data:`TASK_ONLY` as a tool that runs only as a task (MCPServer's decorator cannot say so)."""

    async def list_tools(self) -> list[Tool]:
        tools = await super().list_tools()
        return [
            tool.model_copy(update={"execution": ToolExecution(task_support="required")})
            if tool.name == TASK_ONLY
            else tool
            for tool in tools
        ]


def build(*, image_bytes: int = 0) -> MCPServer:
    """The server; ``image_bytes`` > 0 pads the big image tool's PNG to that size (a size the platform must bound)."""
    server = AllContentServer("all_content", title="All content", instructions="Test tools.", version="1.0.0")

    @server.custom_route(HEALTH_PATH, methods=["GET"])
    async def health(request: Request) -> Response:
        return JSONResponse({"status": "ok", "server": "all_content"})

    @server.tool(annotations=READ_ONLY, structured_output=False)
    def tiny_image() -> list[ContentBlock]:
        """A small picture of the line's coverage map, with a caption."""
        return [
            TextContent(text="The coverage map:"),
            ImageContent(data=_b64(png_pixel()), mime_type="image/png"),
        ]

    @server.tool(annotations=READ_ONLY, structured_output=False)
    def big_image() -> list[ContentBlock]:
        """A picture larger than the platform keeps."""
        return [ImageContent(data=_b64(png_pixel() + b"\x00" * image_bytes), mime_type="image/png")]

    @server.tool(annotations=READ_ONLY, structured_output=False)
    def voice_note(msisdn: str) -> list[ContentBlock]:
        """The line's voicemail greeting."""
        return [AudioContent(data=_b64(wav_silence()), mime_type="audio/wav")]

    @server.tool(annotations=READ_ONLY, structured_output=False)
    def resource_links(msisdn: str) -> list[ContentBlock]:
        """Links to the line's documents."""
        return [
            TextContent(text="Here are 2 resource links to the line's documents."),
            ResourceLink(
                uri="https://docs.example.com/contract.pdf",
                name="contract.pdf",
                title="Contract",
                mime_type="application/pdf",
                description="The signed contract",
            ),
            ResourceLink(uri="file:///invoices/2026-10.txt", name="invoice-2026-10", mime_type="text/plain"),
        ]

    @server.tool(annotations=READ_ONLY, structured_output=False)
    def embedded_text(msisdn: str) -> list[ContentBlock]:
        """The contract's terms, embedded."""
        return [
            EmbeddedResource(
                resource=TextResourceContents(uri="test://contract/terms", mime_type="text/plain", text=EMBEDDED_TEXT)
            )
        ]

    @server.tool(annotations=READ_ONLY, structured_output=False)
    def embedded_blob(msisdn: str) -> list[ContentBlock]:
        """The contract as a gzip file, embedded."""
        return [
            EmbeddedResource(
                resource=BlobResourceContents(
                    uri="test://contract/contract.txt.gz", mime_type="application/gzip", blob=_b64(b"\x1f\x8b" * 8)
                )
            )
        ]

    @server.tool(name=DOTTED, annotations=READ_ONLY)
    def files_read(path: str) -> str:
        """Read a file of the line's folder."""
        return f"contents of {path}"

    @server.tool(name=TASK_ONLY, annotations=READ_ONLY)
    def research_report(topic: str) -> str:
        """A research report (runs only as a background task)."""
        return f"report on {topic}"

    @server.tool(annotations=READ_ONLY)
    async def long_operation(ctx: Context, steps: int = PROGRESS_STEPS) -> str:
        """A slow operation that reports its progress (no required argument)."""
        for step in range(1, steps + 1):
            await ctx.report_progress(step, steps, f"step {step} of {steps}")
            await anyio.sleep(0.05)
        return f"long operation done in {steps} steps"

    @server.tool(annotations=READ_ONLY)
    def server_status() -> dict[str, Any]:
        """The server's status: whether the network is up (no argument)."""
        return {"network": "up", "message": "All systems operational."}

    return server


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=int(os.environ.get("MCP_ALL_CONTENT_PORT") or 8400))
    parser.add_argument("--delay-ms", type=int, default=0, help="ignored (the test harness's common option)")
    parser.add_argument("--log-level", type=str.upper, default="WARNING")
    parser.add_argument("--image-bytes", type=int, default=int(os.environ.get("MCP_IMAGE_BYTES") or 300_000))
    parser.add_argument("--stdio", action="store_true", help="serve stdio instead of HTTP")
    args = parser.parse_args()
    server = build(image_bytes=args.image_bytes)
    if args.stdio:
        server.run("stdio")
        return
    app = server.streamable_http_app(streamable_http_path=MCP_PATH, stateless_http=True, host=args.host)
    uvicorn.run(
        app, host=args.host, port=args.port, log_level=args.log_level.lower(), workers=1, log_config=log_config()
    )


if __name__ == "__main__":
    main()
