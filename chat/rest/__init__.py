"""The chat API's REST face: a message's routes (gateway, chat and multi-agent preview, as JSON or as Server-Sent
Events, :mod:`chat.rest.messages`), routing debug (:mod:`chat.rest.debug`), the agents (:mod:`chat.rest.agents`), a
tenant's sessions and their live state (:mod:`chat.rest.sessions`) and feedback on answers (:mod:`chat.rest.feedback`);
health is :mod:`chat.health`.

Views stay thin: the front door (:mod:`chat.intake`) reads the message and finds its tenant, profile and route;
the engine runs the turn; selectors and services do the rest. Errors are mapped to JSON in one place
(:mod:`common.errors`).
"""
