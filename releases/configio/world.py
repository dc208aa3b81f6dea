"""What an import compares with and writes from: the rows the database holds now (:class:`World`), the
entities the files name with their references resolved (:class:`Plan`), and the :class:`ImportReport` of what it did.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from agents.models import AgentProfile, McpServer, McpTool, Specialist, SpecialistPrompt
from releases.configio.fields import Parsed, Patch
from routing.models import Capability, Goal, Intent, StatePolicy

# Entity kinds in the order they are written (and reported).
KINDS = (
    "MCP server",
    "MCP tool",
    "profile",
    "specialist",
    "prompt version",
    "intent",
    "state policy",
    "capability",
    "goal",
    "knowledge source",
    "knowledge document",
)


PLURALS = {"state policy": "state policies", "capability": "capabilities"}


@dataclass
class ImportReport:
    """What an import did, per entity kind: ``created``, ``updated`` and ``unchanged`` counts."""

    counts: dict[str, Counter] = field(default_factory=lambda: {kind: Counter() for kind in KINDS})
    warnings: list[str] = field(default_factory=list)
    dry_run: bool = False

    def count(self, kind: str, status: str) -> None:
        self.counts[kind][status] += 1

    @property
    def changed(self) -> bool:
        return any(counter["created"] or counter["updated"] for counter in self.counts.values())

    def summary_lines(self) -> list[str]:
        lines = []
        for kind in KINDS:
            counter = self.counts[kind]
            if not sum(counter.values()):
                continue
            parts = [f"{counter[status]} {status}" for status in ("created", "updated", "unchanged") if counter[status]]
            lines.append(f"{PLURALS.get(kind, kind + 's')}: {', '.join(parts)}")
        return lines


@dataclass
class World:
    servers: dict[str, McpServer]
    tools: dict[str, McpTool]
    profiles: dict[str, AgentProfile]
    specialists: dict[tuple[str, str], Specialist]
    intents: dict[tuple[str, str], Intent]
    policies: dict[tuple[str, str], StatePolicy]
    active_prompts: dict[int, SpecialistPrompt]
    capabilities: dict[str, Capability]
    goals: dict[tuple[str, str], Goal]
    domain_servers: dict[str, set[str]]  # domain → the servers of its stored goals and capabilities

    @classmethod
    def load(cls, parsed: Parsed) -> World:
        """Every row the import may compare with or refer to (configuration tables are small)."""
        routed = {patch.key[0] for patch in (*parsed.intents, *parsed.policies)}
        intents = (
            Intent.objects.filter(profile__agent_id__in=routed)
            .select_related("profile", "specialist")
            .prefetch_related("mcp_tools", "keywords")
        )
        policies = StatePolicy.objects.filter(profile__agent_id__in=routed).select_related(
            "profile", "specialist", "intent"
        )
        specialists = Specialist.objects.select_related("profile").prefetch_related("allowed_tools", "handoff_targets")
        return cls(
            servers={server.name: server for server in McpServer.objects.all()},
            tools={tool.name: tool for tool in McpTool.objects.select_related("server")},
            profiles={
                profile.agent_id: profile for profile in AgentProfile.objects.select_related("fallback_specialist")
            },
            specialists={(s.profile.agent_id, s.name): s for s in specialists},
            intents={(i.profile.agent_id, i.name): i for i in intents},
            policies={(p.profile.agent_id, p.state): p for p in policies},
            active_prompts={p.specialist_id: p for p in SpecialistPrompt.objects.filter(is_active=True)},
            capabilities={c.name: c for c in Capability.objects.select_related("server")},
            goals={(g.domain, g.name): g for g in Goal.objects.select_related("server")},
            domain_servers=_domain_servers(),
        )


def _domain_servers() -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for model in (Goal, Capability):
        for domain, server in model.objects.values_list("domain", "server__name").distinct():
            out.setdefault(domain, set()).add(server)
    return out


@dataclass
class Plan:
    servers: dict[str, Patch]
    tools: dict[str, Patch]
    profiles: dict[str, Patch]
    specialists: dict[tuple[str, str], Patch]
    intents: dict[tuple[str, str], Patch]
    policies: dict[tuple[str, str], Patch]
    capabilities: dict[str, Patch]
    goals: dict[tuple[str, str], Patch]
