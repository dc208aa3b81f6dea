"""The faces: every way a message comes in (REST and SSE, WebSocket, OpenAI-compatible, chat page, debug, health,
sessions), all through chat.intake. Layer 8: imports the release lifecycle, the engine and below.

The layers and their rules: docs/architecture.md.
"""
