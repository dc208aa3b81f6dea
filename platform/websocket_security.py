"""Which WebSocket handshakes may reach the consumers.

Channels' ``AllowedHostsOriginValidator`` refuses a handshake without an ``Origin`` header, which would
shut out every non-browser client (``websocat``, the ``websockets`` library, SDKs) that authenticates
with an API key. Cross-site WebSocket hijacking needs a browser, and a browser always sends ``Origin``:
so a handshake *with* an ``Origin`` must come from one of ``ALLOWED_HOSTS`` (as with the Channels
validator), and one without it is let through to authenticate with its key (a session cookie from a
non-browser client is no cross-site risk either).
"""

from channels.security.websocket import OriginValidator


class BrowserOriginValidator(OriginValidator):
    def valid_origin(self, parsed_origin) -> bool:
        if parsed_origin is None:
            return True
        return self.validate_origin(parsed_origin)
