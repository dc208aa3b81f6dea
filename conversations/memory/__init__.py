"""Memory beyond the window: a conversation's running summary of the turns its specialists no longer read
(:mod:`.summary`), and the facts a customer asked the platform to remember across their sessions (:mod:`.facts`,
read from their messages by :mod:`.commands`). :mod:`.part` is the turn's part of it; :mod:`.stage` the graph's
steps over it. docs/memory.md says what is kept, for how long, and what it costs.
"""
