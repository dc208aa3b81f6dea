"""``manage.py seed_demo [--sync] [--force]``: the demo profiles (telecom_contas, retail_orders, telecom_assistente,
finance_assistente) from config/demo/, loaded once.

The rule, so that a restart of scripts/start never undoes what an admin did:

- a demo profile is imported only when no profile with its ``agent_id`` exists: with its specialists and prompts
  (agents.yaml) and its routing file (routing.<agent_id>.yaml). A profile that exists is left as it is — its
  published versions and its draft, whatever a user changed;
- what the profiles share — MCP servers (mcp_servers.yaml), MCP tools (tools.yaml), a domain's goals and
  capabilities (goals.<domain>.yaml) — is imported only when missing (by name; a domain when it has no goal yet);
- each profile imported is published as its version 1 with the note ``Demo import (config/demo)``, so customers
  are served the demo and every later edit is a draft until someone publishes it;
- ``--sync`` first reads the manifests of the demo's goal servers (``finance``, which must be running) into goals
  and capabilities, so that finance_assistente's first version has its goals; a server that cannot be reached is
  a warning, and what the sync changes in a profile not imported by this run stays in its draft; once every goal
  server was read, the suites of config/demo/tests/with_sync/ (finance_assistente's, whose cases expect the
  synced goals) are loaded with the others;
- each profile imported gets its conversation tests (config/demo/conversation_tests/, one
  ``conversation_tests.<agent_id>.yaml`` per profile, as ``export_config`` writes them) before it is published;
  those of its with_sync/ (finance_assistente's, whose plans need the synced goals) once every goal server was read;
- each profile imported gets its help centre (config/demo/knowledge/<folder>/<language>/*.md: one knowledge source
  per language, its articles uploaded as documents through the knowledge app's services) before it is published;
  telecom_assistente reads telecom_contas's folder (the same carrier);
- ``--force`` reloads the demo over what was edited: every entity in config/demo is written again (an upsert, as
  ``import_config``), every help-centre article uploaded again (an article whose bytes did not change is left as
  it is), then each demo profile whose draft differs from its live version is published with the note
  ``Demo reloaded (config/demo, --force)``;
- ``--multi-agent-for-everyone`` (what ``first_run --demo`` asks for) sets the ``multi_agent`` rollout flag to 100 %
  while nobody has changed it since the migration made it at 0 %, one line of its history naming this command: a
  demo install then routes every face as its profiles say. Without it, and in a database without the demo, the
  flag stays where it is; once changed by anyone, it is never set again.

The output says, per profile, what was done: ``loaded``, ``already there: left as it is`` or ``reloaded``.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import yaml
from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError
from django.db import transaction

from agents.models import AgentProfile, McpServer, McpTool
from agents.public import McpUnavailable, mcp_server_sync
from common.errors import DomainError
from knowledge.models import KnowledgeSource
from knowledge.public import CREATED, REPLACED, document_ingest
from releases.configio import ConfigImportError, Source, config_import
from releases.configio.source import FAST_LOADER
from releases.evals.files import ConversationTestsFileError, conversation_tests_load, conversation_tests_parse
from releases.management.commands.import_config import read_sources, write_report
from releases.routing_tests import Case, RoutingTestsFileError, routing_tests_load, routing_tests_parse
from releases.versions import NothingToPublish, version_publish
from routing.models import Capability, Goal, PublishedFrom
from routing.public import ConversationCase, live_version, rollout_flag_get, rollout_flag_untouched_set

DEMO_DIR = settings.BASE_DIR / "config" / "demo"
# Saved routing tests of the demo profiles, one file per profile (``profile: P`` / ``tests: [...]``).
TESTS_DIR = DEMO_DIR / "tests"
# Conversation tests of the demo profiles, one file per profile, named as export_config names them.
CONVERSATION_TESTS_DIR = DEMO_DIR / "conversation_tests"
# The demo help centres: KNOWLEDGE_DIR/<folder>/<language>/*.md, one knowledge source per language.
KNOWLEDGE_DIR = DEMO_DIR / "knowledge"
KNOWLEDGE_FOLDERS = {"telecom_assistente": "telecom_contas"}  # else the profile's agent_id
KNOWLEDGE_SOURCES = {"pt": "Central de ajuda", "en": "Help centre", "es": "Centro de ayuda"}
SYNONYMS_FILE = "synonyms.yaml"  # a language folder's synonyms, beside its articles
SYNCED_TESTS = "with_sync"  # suites that need the goals --sync reads (finance_assistente's)
DEMO_NOTE = "Demo import (config/demo)"
FORCE_NOTE = "Demo reloaded (config/demo, --force)"
# The demo's servers that publish a domain manifest (goals and capabilities) read by ``--sync``.
MANIFEST_SERVERS = ("finance",)
# The lists a file is cut along (profiles, servers, tools).
CUT = {"agents", "servers", "tools"}
# The demo's rollout of the multi-agent graph (--multi-agent-for-everyone), and who the flag's history says did it.
DEMO_FLAG = "multi_agent"
DEMO_PERCENTAGE = 100
DEMO_FLAG_ACTOR = "manage.py seed_demo (the demo: every customer on the multi-agent graph)"


def suite_paths(directory: Path, *, synced: bool) -> list[Path]:
    """The suites of ``directory`` (its ``*.yaml``), then, once the goal servers were synced, those of its
    :data:`SYNCED_TESTS` folder."""
    paths = sorted(directory.glob("*.yaml"))
    return paths + sorted((directory / SYNCED_TESTS).glob("*.yaml")) if synced else paths


def help_centre_folder(agent_id: str) -> Path:
    """Where a demo profile's help centre is (a folder per language), whether or not it exists."""
    return KNOWLEDGE_DIR / KNOWLEDGE_FOLDERS.get(agent_id, agent_id)


def synonyms_load(source: KnowledgeSource, path: Path) -> None:
    """The synonyms of ``path`` (``synonyms:``, a list of groups of terms: :mod:`knowledge.synonyms`) as ``source``'s,
    when the file exists and they differ. Raises :class:`CommandError` naming the file when they are invalid."""
    if not path.is_file():
        return
    source.synonyms = (yaml.safe_load(path.read_text(encoding="utf-8")) or {}).get("synonyms") or []
    try:
        source.full_clean(validate_unique=False, validate_constraints=False)
    except ValidationError as exc:
        raise CommandError(f"The demo's help centre is invalid: {path}: {'; '.join(exc.messages)}") from exc
    if KnowledgeSource.objects.filter(pk=source.pk).values_list("synonyms", flat=True).first() != source.synonyms:
        source.save(update_fields=["synonyms", "updated_at"])


def help_centre_load(*, profile: AgentProfile, folder: Path) -> Counter[str]:
    """The articles of ``folder``/<language>/*.md into ``profile``'s knowledge: a source per language
    (:data:`KNOWLEDGE_SOURCES`, made when missing, its synonyms those of the folder's :data:`SYNONYMS_FILE`), each
    article uploaded into it through
    :func:`knowledge.services.document_ingest` (an article whose bytes did not change is left as it is). Returns
    how many articles were ``created``, ``replaced`` and ``unchanged``; nothing for a folder that does not exist.
    All or nothing: raises :class:`CommandError` naming an article that cannot be read."""
    outcomes: Counter[str] = Counter({CREATED: 0, REPLACED: 0})
    with transaction.atomic():
        for language, name in KNOWLEDGE_SOURCES.items():
            paths = sorted((folder / language).glob("*.md"))
            if not paths:
                continue
            source, _ = KnowledgeSource.objects.get_or_create(
                profile=profile, name=name, defaults={"language": language}
            )
            synonyms_load(source, folder / language / SYNONYMS_FILE)
            for path in paths:
                try:
                    report = document_ingest(source=source, file_name=path.name, data=path.read_bytes())
                except DomainError as exc:
                    raise CommandError(f"The demo's help centre is invalid: {path}: {exc.message}") from exc
                outcomes[report.outcome] += 1
    return outcomes


def demo_missing(sources: list[Source]) -> tuple[list[Source], list[str], list[str]]:
    """The parts of ``sources`` not in the database yet, the demo profiles they import, and those already there.

    Files are cut at the level the rule above names (a profile, a server, a tool, a domain); a file left with
    nothing to import is dropped. Comments are not kept (the import does not read them).
    """
    profiles = set(AgentProfile.objects.values_list("agent_id", flat=True))
    servers = set(McpServer.objects.values_list("name", flat=True))
    tools = set(McpTool.objects.values_list("name", flat=True))
    domains = set(Goal.objects.values_list("domain", flat=True)) | set(
        Capability.objects.values_list("domain", flat=True)
    )
    missing: list[Source] = []
    new: list[str] = []
    there: list[str] = []
    for source in sources:
        data = yaml.load(source.text, Loader=FAST_LOADER)  # noqa: S506 — a safe loader
        if not isinstance(data, dict):
            missing.append(source)  # the import reports what is wrong with it
            continue
        kept: dict[str, Any] = {}
        for key, value in data.items():
            if key == "agents" and isinstance(value, list):
                for entry in value:
                    agent_id = entry.get("agent_id") if isinstance(entry, dict) else None
                    (there if agent_id in profiles else new).append(str(agent_id))
                value = [e for e in value if not (isinstance(e, dict) and e.get("agent_id") in profiles)]
            elif key == "servers" and isinstance(value, dict):
                value = {name: entry for name, entry in value.items() if name not in servers}
            elif key == "tools" and isinstance(value, dict):
                value = {name: entry for name, entry in value.items() if name not in tools}
            kept[key] = value
        if "agent_id" in kept:  # a routing file: with its profile
            keep = kept["agent_id"] not in profiles
        elif "domain" in kept:  # a goals file: while its domain has none
            keep = kept["domain"] not in domains
        else:  # a file of profiles, servers or tools: while one of them is missing
            keep = any(kept.get(key) for key in CUT) or not CUT & kept.keys()
        if keep:
            text = source.text if kept == data else yaml.safe_dump(kept, sort_keys=False, allow_unicode=True)
            missing.append(Source(name=source.name, text=text))
    return missing, new, there


class Command(BaseCommand):
    help = (
        "Load the demo configuration (config/demo/*.yaml) once: a demo profile is imported and published as its "
        "version 1 only when no profile with its agent_id exists; shared servers and tools only when missing. "
        "Running it again changes nothing; --force reloads the demo over what was edited."
    )

    def add_arguments(self, parser):
        parser.add_argument(
            "--sync",
            action="store_true",
            help="Read the finance server's manifest (goals, capabilities) before publishing; the server must run.",
        )
        parser.add_argument(
            "--force",
            action="store_true",
            help="Reload every demo entity over what was edited, and publish the demo profiles that changed.",
        )
        parser.add_argument(
            "--multi-agent-for-everyone",
            action="store_true",
            help="Set the multi_agent rollout flag to 100 %% while nobody has changed it since it was made at 0 %%.",
        )

    def handle(self, *args, **options):
        sources = read_sources([str(DEMO_DIR)])
        if options["force"]:
            new, there = self._agent_ids(sources), list[str]()
            to_import = sources
        else:
            to_import, new, there = demo_missing(sources)
        title = "Demo data (telecom_contas, retail_orders, telecom_assistente, finance_assistente)"
        if to_import:
            try:
                report = config_import(sources=to_import)
            except ConfigImportError as exc:
                raise CommandError("\n".join(["The demo configuration is invalid:", *exc.messages])) from exc
            write_report(self, report, title=title)
        else:
            self.stdout.write(f"{title}: changed nothing.")
        synced = self._sync() if options["sync"] else False
        note = FORCE_NOTE if options["force"] else DEMO_NOTE
        tests = self._tests(synced=synced)
        conversations = self._conversation_tests(synced=synced)
        for agent_id in new:
            profile = AgentProfile.objects.get(agent_id=agent_id)
            if tests.get(agent_id):  # before publishing: the publishing gate runs them
                loaded = routing_tests_load(profile=profile, cases=tests[agent_id])
                self.stdout.write(f"  {agent_id}: routing tests: {loaded.created} created, {loaded.updated} updated.")
            if conversations.get(agent_id):
                loaded = conversation_tests_load(profile=profile, cases=conversations[agent_id])
                self.stdout.write(
                    f"  {agent_id}: conversation tests: {loaded.created} created, {loaded.updated} updated."
                )
            self._knowledge(profile)
            try:
                version = version_publish(profile=profile, note=note, published_from=PublishedFrom.DEMO)
            except NothingToPublish:
                live = live_version(profile)
                self.stdout.write(
                    f"  {agent_id}: reloaded; its live version {live.number if live else ''} is the same."
                )
                continue
            except DomainError as exc:  # e.g. a saved routing test fails: the draft is loaded, not published
                self.stderr.write(self.style.WARNING(f"warning: {agent_id}: loaded, not published: {exc.message}"))
                continue
            done = "reloaded" if options["force"] else "loaded"
            self.stdout.write(f"  {agent_id}: {done}, published as version {version.number} ({note}).")
        for agent_id in there:
            self.stdout.write(f"  {agent_id}: already there: left as it is (--force reloads it).")
        if options["multi_agent_for_everyone"]:
            self._flag()

    def _flag(self) -> None:
        """The demo's multi_agent flag: at 100 % while untouched since its migration (the module's docstring)."""
        if rollout_flag_untouched_set(key=DEMO_FLAG, percentage=DEMO_PERCENTAGE, actor=DEMO_FLAG_ACTOR):
            self.stdout.write(
                f"Rollout flag {DEMO_FLAG}: {DEMO_PERCENTAGE} % of users on the multi-agent graph, for the demo "
                f"(`manage.py set_rollout {DEMO_FLAG} --percentage N` rolls it out in stages instead)."
            )
            return
        flag = rollout_flag_get(key=DEMO_FLAG)
        if flag is None:
            self.stdout.write(f"Rollout flag {DEMO_FLAG}: none, so every profile runs its own mode.")
        else:
            kill = ", kill switch on" if flag.kill_switch else ""
            self.stdout.write(f"Rollout flag {DEMO_FLAG}: left as it is ({flag.percentage} %{kill}).")

    @staticmethod
    def _tests(*, synced: bool) -> dict[str, list[Case]]:
        """config/demo/tests/*.yaml by profile (none while the directory does not exist), and the suites of
        with_sync/ once the goal servers were synced: their cases expect the goals the manifests carry."""
        out: dict[str, list[Case]] = {}
        for path in suite_paths(TESTS_DIR, synced=synced):
            try:
                agent_id, cases = routing_tests_parse(path.read_text(encoding="utf-8"), name=str(path))
            except RoutingTestsFileError as exc:
                raise CommandError(f"The demo's routing tests are invalid:\n{exc.message}") from exc
            out.setdefault(agent_id, []).extend(cases)
        return out

    @staticmethod
    def _conversation_tests(*, synced: bool) -> dict[str, list[ConversationCase]]:
        """config/demo/conversation_tests/*.yaml by profile (none while the directory does not exist), and those of
        with_sync/ once the goal servers were synced: their plans need the goals the manifests carry."""
        out: dict[str, list[ConversationCase]] = {}
        for path in suite_paths(CONVERSATION_TESTS_DIR, synced=synced):
            try:
                agent_id, cases = conversation_tests_parse(path.read_text(encoding="utf-8"), name=path.name)
            except ConversationTestsFileError as exc:
                raise CommandError(f"The demo's conversation tests are invalid:\n{exc.message}") from exc
            out.setdefault(agent_id, []).extend(cases)
        return out

    def _knowledge(self, profile: AgentProfile) -> None:
        outcomes = help_centre_load(profile=profile, folder=help_centre_folder(profile.agent_id))
        if total := sum(outcomes.values()):
            self.stdout.write(
                f"  {profile.agent_id}: help centre: {total} articles, {outcomes[CREATED]} created, "
                f"{outcomes[REPLACED]} replaced."
            )

    @staticmethod
    def _agent_ids(sources: list[Source]) -> list[str]:
        out = []
        for source in sources:
            data = yaml.load(source.text, Loader=FAST_LOADER)  # noqa: S506 — a safe loader
            if isinstance(data, dict) and isinstance(data.get("agents"), list):
                out += [str(entry["agent_id"]) for entry in data["agents"] if isinstance(entry, dict)]
        return out

    def _sync(self) -> bool:
        """Read the goal servers' manifests; whether every one of them was read without an error."""
        synced = True
        for server in McpServer.objects.filter(name__in=MANIFEST_SERVERS, enabled=True):
            try:
                report = mcp_server_sync(server=server)
            except (McpUnavailable, ValidationError) as exc:
                self.stderr.write(self.style.WARNING(f"warning: {server.name} could not be synchronised: {exc}"))
                synced = False
                continue
            self.stdout.write(str(report))
            for line in report.lines:
                self.stdout.write(line)
            for error in report.errors:
                self.stderr.write(self.style.WARNING(f"warning: {error}"))
                synced = False
        return synced
