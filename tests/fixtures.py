"""The named cast of fixtures shared by every app's tests.

* ``tenant`` / ``tenant_key`` — a customer organisation and its bearer key;
* ``debug_key`` — a key of the same tenant made with ``--debug``;
* ``outsider`` / ``outsider_key`` — another tenant that must see nothing of ``tenant``;
* ``staff_user`` — a superuser analyst; ``editor`` — a member of "Routing editors"; ``approver`` — a member of
  "Release approvers" (approves others' publishes and rollout starts);
* ``tenant_analyst`` — a member of "Analysts" who may read ``tenant``'s conversations only;
* ``telecom`` — a small profile in the demo's shape, built with factories;
* ``migrated_flag`` — the ``multi_agent`` flag as its migration makes it; ``asgi_server`` — the app under uvicorn;
* ``spans`` — this process's spans, in the OpenTelemetry SDK's in-memory exporter.
"""

from __future__ import annotations

import contextlib
import functools
from typing import Any

import pytest
from rest_framework.test import APIClient

# Project modules are imported inside the fixtures: this plugin loads before Django is set up.


@pytest.fixture(scope="session", autouse=True)
def fast_password_hashing():
    """The users the tests make and log in hash their passwords with MD5 (Django's advice for test settings): the
    production hasher's PBKDF2, a million rounds, costs 0.5-2 s a hash on a 2-core machine, and a test that makes a
    staff user and logs them in pays two — a quarter of the suite's time went there. The servers tests start in
    other processes keep the production hashers: none of them checks a password of a user made here."""
    from django.test import override_settings

    with override_settings(PASSWORD_HASHERS=["django.contrib.auth.hashers.MD5PasswordHasher"]):
        yield


@pytest.fixture(scope="session", autouse=True)
def static_files_found_when_asked():
    """WhiteNoise in this process finds a static file when one is asked for (``WHITENOISE_AUTOREFRESH``), as it does
    under ``DJANGO_DEBUG``, which the settings were read with. Otherwise every test client's first request (each
    client loads the middleware anew) listed and stat'ed every static file of every app — about 20 ms a client, half
    of a small admin test's time — because pytest-django turns ``DEBUG`` off after the settings chose the finders.
    A request outside ``STATIC_URL`` goes on to the view the same way in both modes; the servers tests start in other
    processes keep their own settings."""
    from django.test import override_settings

    with override_settings(WHITENOISE_AUTOREFRESH=True):
        yield


@pytest.fixture(scope="session", autouse=True)
def tls_context_shared_by_the_http_clients():
    """The HTTP clients httpx and httpx2 make with the default verification (the openai SDK's, LangChain's, the tests'
    own ``httpx.post`` calls, the platform's outbound clients in this process) share one TLS context, as one process's
    clients may: each built its own and read the ~120 CA certificates into it, 23 ms of CPU a client, 8 % of the chat
    tests' CPU. A client given its own ``verify`` or ``cert``, or made under other ``SSL_CERT_*`` variables, gets a
    context of its own as before; nothing in the project changes a context it did not make. The servers tests start in
    other processes are untouched."""
    import os

    import httpx._transports.default as httpx_transports
    import httpx2._transports.default as httpx2_transports

    def shared(made):
        contexts: dict[tuple, Any] = {}

        def create_ssl_context(verify: Any = True, cert: Any = None, trust_env: bool = True):
            if verify is not True or cert:
                return made(verify=verify, cert=cert, trust_env=trust_env)
            key = (trust_env, os.environ.get("SSL_CERT_FILE"), os.environ.get("SSL_CERT_DIR"))
            if key not in contexts:
                contexts[key] = made(verify=verify, cert=cert, trust_env=trust_env)
            return contexts[key]

        return create_ssl_context

    with pytest.MonkeyPatch.context() as patch:
        for transports in (httpx_transports, httpx2_transports):
            patch.setattr(transports, "create_ssl_context", shared(transports.create_ssl_context))
        yield


# A table holding more rows than this is truncated, with every other: DELETE would leave their dead versions to vacuum.
FLUSH_DELETES_UP_TO = 1000
# The tables a flush puts back (content_types_put_back_after_a_flush), and, for each database, the digest of each as
# put back, and those the last flush left as they were (they held the rows it would put back).
PUT_BACK_TABLES = ("django_content_type", "auth_permission")
_put_back_digests: dict[str, dict[str, str]] = {}
_kept_by_last_flush: dict[str, set[str]] = {}


def _digests(connection: Any) -> dict[str, str]:
    """The md5 of each of :data:`PUT_BACK_TABLES`' rows (every column), in the order of their ids."""
    quote = connection.ops.quote_name
    digests = ", ".join(
        f"(SELECT md5(coalesce(string_agg(t::text, ',' ORDER BY t.id), '')) FROM {quote(table)} t)"  # noqa: S608 — names of ours
        for table in PUT_BACK_TABLES
    )
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT {digests}")
        return dict(zip(PUT_BACK_TABLES, cursor.fetchone(), strict=True))


@pytest.fixture(scope="session", autouse=True)
def flush_empties_the_tables_written():
    """A transactional test's flush (Django's ``flush``, at the test's end) truncated all ~80 tables in one statement,
    for which PostgreSQL makes each table's and index's files anew: 0.3-0.5 s of the server's a test on the 2-core
    machine, most of the tables empty already. On PostgreSQL, one query finds the tables that hold a row, and the flush
    deletes their rows, in its one transaction (the foreign keys are all deferred: checked at its commit). Where a
    table holds more than :data:`FLUSH_DELETES_UP_TO` rows, or the sequences are to be reset, it truncates every table
    as before. A table the flush puts back (the content types, the permissions) that holds the very rows it would put
    back (same digest of every column, in id order) is left as it is, not deleted and written again."""
    from django.core.management import sql
    from django.core.management.commands import flush

    def written_emptied(style: Any, connection: Any, reset_sequences: bool = True, allow_cascade: bool = False):
        def as_before() -> list[str]:
            return sql.sql_flush(style, connection, reset_sequences=reset_sequences, allow_cascade=allow_cascade)

        _kept_by_last_flush[connection.alias] = set()
        if connection.vendor != "postgresql" or reset_sequences or allow_cascade:
            return as_before()
        tables = connection.introspection.django_table_names(only_existing=True, include_views=False)
        quote = connection.ops.quote_name
        held = " UNION ALL ".join(
            f"SELECT %s, (SELECT count(*) FROM (SELECT FROM {quote(table)} LIMIT {FLUSH_DELETES_UP_TO + 1}) r)"  # noqa: S608 — names from the catalogue
            for table in tables
        )
        with connection.cursor() as cursor:
            cursor.execute(held, tables)
            rows = {table: count for table, count in cursor.fetchall() if count}
        if any(count > FLUSH_DELETES_UP_TO for count in rows.values()):
            return as_before()
        if connection.alias in _put_back_digests:
            now = _digests(connection)
            kept = {table for table, digest in _put_back_digests[connection.alias].items() if now[table] == digest}
            _kept_by_last_flush[connection.alias] = kept
            rows = {table: count for table, count in rows.items() if table not in kept}
        return ["SET CONSTRAINTS ALL DEFERRED", *(f"DELETE FROM {quote(table)}" for table in sorted(rows))]  # noqa: S608

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(flush, "sql_flush", written_emptied)
        yield


@pytest.fixture(scope="session", autouse=True)
def content_types_put_back_after_a_flush():
    """A transactional test's flush empties every table, then Django's ``post_migrate`` handlers make the content
    types and permissions again, one app at a time, in about 0.5 s of each of the suite's 470 transactional tests.
    The rows the first flush of this process made are recorded, and each later flush puts the same rows back (their
    ids too) in two statements, in a table it emptied (one it left holding those rows is left as it is). The
    handlers, which would then find nothing to make, run only if ``post_migrate`` has a receiver besides them."""
    import weakref

    from django.apps import apps
    from django.contrib.auth.management import create_permissions
    from django.contrib.contenttypes.management import create_contenttypes
    from django.core.management.commands import flush
    from django.db import connections
    from django.db.models.signals import post_migrate

    made = flush.emit_post_migrate_signal
    recorded: dict[str, tuple[list, list]] = {}

    def put_back_then_emit(verbosity: int, interactive: bool, db: str, **kwargs: Any) -> None:
        content_type = apps.get_model("contenttypes", "ContentType")
        permission = apps.get_model("auth", "Permission")
        if db not in recorded:
            made(verbosity, interactive, db, **kwargs)
            recorded[db] = (  # the rows the handlers made on the emptied tables
                list(content_type.objects.using(db).values("id", "app_label", "model")),
                list(permission.objects.using(db).values("id", "name", "content_type_id", "codename")),
            )
            if connections[db].vendor == "postgresql":
                _put_back_digests[db] = _digests(connections[db])
            return
        types, permissions = recorded[db]
        kept = _kept_by_last_flush.get(db, set())
        if content_type._meta.db_table not in kept:
            content_type.objects.using(db).bulk_create(content_type(**row) for row in types)
        if permission._meta.db_table not in kept:
            permission.objects.using(db).bulk_create(permission(**row) for row in permissions)
        content_type.objects.clear_cache()  # as create_contenttypes does
        receivers = {ref() if isinstance(ref, weakref.ReferenceType) else ref for _, ref, _ in post_migrate.receivers}
        if receivers - {create_permissions, create_contenttypes}:
            made(verbosity, interactive, db, **kwargs)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(flush, "emit_post_migrate_signal", put_back_then_emit)
        yield


@pytest.fixture(autouse=True)
def database_circuit_closed():
    """No test starts with the database circuit opened by an earlier test's outage (common/infra/outages.py)."""
    from common.infra.outages import database_circuit

    database_circuit.reset()
    yield
    database_circuit.reset()


@pytest.fixture(autouse=True)
def channel_layer_of_its_own():
    """Each test gets channel layers of its own: channels_redis keeps its receiving state (the receive lock, the
    buffers) on the layer, bound to the event loop that first used it, and a test runs its clients in a loop of its
    own — an earlier test's layer on the same worker failed a socket's disconnect with "bound to a different event
    loop". A served process has one loop, and one layer for its life."""
    from channels.layers import channel_layers

    channel_layers.backends.clear()
    yield
    channel_layers.backends.clear()


@pytest.fixture(autouse=True)
def fresh_routing_snapshot():
    """Each test starts from the database it built, not from a snapshot of an earlier test, nor from the
    configuration version an earlier test left in the shared cache (it could expire mid-test and make the
    snapshot rebuild between two messages)."""
    from django.core.cache import cache

    from common.config_version import CACHE_KEY
    from routing import snapshot

    cache.delete(CACHE_KEY)
    snapshot.invalidate()
    yield
    snapshot.invalidate()


def _key(tenant_slug: str, name: str, **flags):
    from tenants.services import api_key_create

    key, raw = api_key_create(tenant_slug=tenant_slug, name=name, **flags)
    key.raw = raw  # the raw key exists only here: the database keeps its hash
    return key


@pytest.fixture
def tenant_key(db):
    return _key("tenant_a", "test key")


@pytest.fixture
def tenant(tenant_key):
    return tenant_key.tenant


@pytest.fixture
def debug_key(db):
    return _key("tenant_a", "debug key", is_debug=True)


@pytest.fixture
def outsider_key(db):
    return _key("outsider", "outsider key")


@pytest.fixture
def outsider(outsider_key):
    return outsider_key.tenant


def _client_for(raw_key: str) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {raw_key}")
    return client


@pytest.fixture
def api(tenant_key) -> APIClient:
    return _client_for(tenant_key.raw)


@pytest.fixture
def debug_api(debug_key) -> APIClient:
    return _client_for(debug_key.raw)


@pytest.fixture
def outsider_api(outsider_key) -> APIClient:
    return _client_for(outsider_key.raw)


@pytest.fixture
def multi_agent_for_everyone(db):
    """The ``multi_agent`` rollout at 100 %: every face a customer talks through runs the multi-agent graph."""
    from routing.services import rollout_flag_set

    rollout_flag_set(key="multi_agent", actor="test", percentage=100, create=True)


@pytest.fixture
def migrated_flag(db):
    """The ``multi_agent`` flag as migration routing.0007 makes it (0 %, its creation its only history), made again
    where a transactional test's flush emptied the table."""
    from routing.services import rollout_flag_set

    rollout_flag_set(key="multi_agent", actor="migration routing.0007_rollout_flags", create=True)


@pytest.fixture
def asgi_server(transactional_db):
    """``platform.asgi.application`` served by uvicorn in a thread on a free port: its ``http://`` address (the same
    port speaks WebSocket). The data it reads must be committed: hence ``transactional_db``."""
    import socket
    import threading
    import time

    import uvicorn

    from platform.asgi import application
    from tests.served import PromptUvicorn

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    config = uvicorn.Config(application, log_level="warning", lifespan="off", ws="websockets-sansio")
    server = PromptUvicorn(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 60  # a hang guard
    while not server.started:
        assert time.monotonic() < deadline, "uvicorn did not start"
        time.sleep(0.02)
    yield f"http://127.0.0.1:{sock.getsockname()[1]}"
    server.stop()
    thread.join(10)
    sock.close()


@pytest.fixture
def staff_user(django_user_model):
    return django_user_model.objects.create_superuser("analyst", "analyst@example.com", "analyst-password")


# The apps whose migrations may make a group or give it permissions, lowest layer first.
GROUP_MIGRATION_APPS = (
    "tenants",
    "handoffs",
    "agents",
    "knowledge",
    "routing",
    "conversations",
    "releases",
    "chat",
    "analytics",
)


def _codenames(modules, table: str) -> set[tuple[str, str, str]]:
    """Each (app, model, permission codename) the migration ``modules`` name in their ``table``."""

    def default(action: str, model: str) -> str:
        return f"{action}_{model}"

    return {
        (app, model, getattr(module, "codename", default)(action, model))
        for module in modules
        for (app, model), actions in getattr(module, table, {}).items()
        for action in actions
    }


def group_from_migrations(name: str):
    """The group ``name`` as its data migrations leave it. A transactional test's flush empties the tables only data
    migrations fill, the groups among them, so the group is rebuilt from its migrations when it is gone: every
    migration module of the project's apps whose ``GROUP_NAME`` is ``name`` grants its ``PERMISSIONS`` and takes
    back its ``REVOKED`` (named ``<action>_<model>``, or by the module's ``codename(action, model)``), read once a
    process (:func:`_group_permissions`), the permissions' ids read in one query."""
    from django.contrib.auth.models import Group, Permission

    group, created = Group.objects.get_or_create(name=name)
    if created:
        wanted = _group_permissions(name)
        ids = {
            (app, model, codename): pk
            for pk, app, model, codename in Permission.objects.values_list(
                "pk", "content_type__app_label", "content_type__model", "codename"
            )
        }
        missing = [permission for permission in wanted if permission not in ids]
        assert not missing, f"the group {name!r} is granted permissions the database has not: {missing}"
        group.permissions.set([ids[permission] for permission in wanted])
    return group


@functools.cache
def _group_permissions(name: str) -> tuple[tuple[str, str, str], ...]:
    """Each (app, model, codename) of the permissions the migrations give the group ``name``, its app that of today."""
    import importlib
    import importlib.util
    import pkgutil

    modules = []
    for app in GROUP_MIGRATION_APPS:
        if importlib.util.find_spec(f"{app}.migrations") is None:
            continue
        package = importlib.import_module(f"{app}.migrations")
        for info in sorted(pkgutil.iter_modules(package.__path__), key=lambda info: info.name):
            module = importlib.import_module(f"{app}.migrations.{info.name}")
            if getattr(module, "GROUP_NAME", None) == name and hasattr(module, "PERMISSIONS"):
                modules.append(module)
    assert modules, f"no migration makes the group {name!r}"
    # A model that moved app after a group's migration named it is found under its app of today (the move migrated
    # its content type, and so the group's permissions, with it).
    moved = importlib.import_module("routing.migrations.0046_release_models_moved_to_releases").MOVED
    app_now = {("routing", model): "releases" for model in moved}
    granted, revoked = _codenames(modules, "PERMISSIONS"), _codenames(modules, "REVOKED")
    wanted = {(app_now.get((app, model), app), model, codename) for app, model, codename in granted - revoked}
    return tuple(sorted(wanted))


@pytest.fixture
def editor(django_user_model):
    """A member of "Routing editors" (staff), with no tenant granted."""
    user = django_user_model.objects.create_user("editor", "editor@example.com", "editor-password", is_staff=True)
    user.groups.add(group_from_migrations("Routing editors"))
    return user


@pytest.fixture
def tenant_analyst(django_user_model, tenant):
    """A member of "Analysts" (staff) granted the reading of ``tenant``'s conversations, and nothing of another."""
    from tenants.models import TenantGrant

    user = django_user_model.objects.create_user("reader", "reader@example.com", "reader-password", is_staff=True)
    user.groups.add(group_from_migrations("Analysts"))
    TenantGrant.objects.create(tenant=tenant, user=user, read_conversations=True)
    return user


@pytest.fixture
def approver(django_user_model):
    """A member of "Release approvers" (staff), with no tenant granted."""
    user = django_user_model.objects.create_user("approver", "approver@example.com", "approver-password", is_staff=True)
    user.groups.add(group_from_migrations("Release approvers"))
    return user


@pytest.fixture
def telecom(db):
    """``telecom_contas`` with billing/orders/product/support specialists and the seed's intents: built once per
    worker and restored from its rows after (tests/demo_snapshot.py), as a fresh object each time."""
    from agents.models import AgentProfile
    from tests.demo_snapshot import replayed

    return replayed(
        ("telecom",), telecom_build, keep=lambda profile: profile.pk, revive=lambda pk: AgentProfile.objects.get(pk=pk)
    )


def telecom_build():
    """The ``telecom`` fixture's profile, built with factories."""
    from tests.factories import (
        AgentProfileFactory,
        IntentFactory,
        McpServerFactory,
        McpToolFactory,
        SpecialistFactory,
    )

    profile = AgentProfileFactory(agent_id="telecom_contas", name="Agente Telecom Contas", domain="telecom")
    billing = SpecialistFactory(profile=profile, name="billing_agent")
    orders = SpecialistFactory(profile=profile, name="orders_agent")
    product = SpecialistFactory(profile=profile, name="product_agent")
    support = SpecialistFactory(profile=profile, name="support_agent")
    profile.fallback_specialist = support
    profile.save(update_fields=["fallback_specialist"])
    telecom_server = McpServerFactory(name="telecom", endpoint="http://127.0.0.1:8100/mcp")
    retail_server = McpServerFactory(name="retail", endpoint="http://127.0.0.1:8200/mcp")

    def schema(required: list[str], optional: list[str] = ()) -> dict:
        names = [*required, *optional]
        return {"type": "object", "properties": {n: {"type": "string"} for n in names}, "required": required}

    fatura = McpToolFactory(
        name="consultar_fatura", server=telecom_server, args_schema=schema(["msisdn"], ["invoice_id"])
    )
    pagamentos = McpToolFactory(name="consultar_pagamentos", server=telecom_server, args_schema=schema(["msisdn"]))
    pedido = McpToolFactory(
        name="consultar_pedido", server=retail_server, args_schema=schema(["order_id"], ["customer_id"])
    )
    entrega = McpToolFactory(name="consultar_entrega", server=retail_server, args_schema=schema(["order_id"]))
    billing.allowed_tools.set([fatura, pagamentos])
    orders.allowed_tools.set([pedido, entrega])
    IntentFactory(
        profile=profile,
        name="billing_invoice_explanation",
        domain="telecom",
        specialist=billing,
        priority=10,
        next_state="",
        keywords=["fatura", "conta", "cobrança", "boleto", "vencimento", "segunda via", "contestar", "valor alto"],
        tools=[fatura, pagamentos],
    )
    IntentFactory(
        profile=profile,
        name="retail_order_tracking",
        domain="retail",
        specialist=orders,
        priority=20,
        keywords=["pedido", "entrega", "rastreio", "atraso"],
        tools=[pedido, entrega],
    )
    IntentFactory(
        profile=profile,
        name="product_information",
        domain="telecom",
        specialist=product,
        priority=30,
        keywords=["produto", "plano", "serviço", "internet"],
    )
    IntentFactory(
        profile=profile,
        name="support_request",
        domain="retail",
        specialist=support,
        priority=40,
        keywords=["troca", "devolução", "garantia", "defeito"],
    )
    return profile


@pytest.fixture
def scripted_llm(settings):
    """A running scripted OpenAI-compatible server, configured as the platform's LLM endpoint."""
    from agents.llm import reset_clients
    from tests.llm_server import ScriptedLLMServer

    server = ScriptedLLMServer().start()
    settings.OPENAI_BASE_URL = server.base_url
    settings.OPENAI_API_KEY = "test-key"
    settings.LLM_MODEL = "scripted-model"
    settings.LLM_MAX_RETRIES = 0
    settings.LLM_TIMEOUT_SECONDS = 5
    reset_clients()
    yield server
    server.stop()
    reset_clients()


@pytest.fixture(autouse=True)
def supervisor_plans_in_process(settings):
    """Plans run in-process unless a test asks for Celery workers (and uses ``celery_worker``).

    The suite runs with a real Redis (``REDIS_URL``), where "auto" would pick
    Celery, but a worker can only see committed rows: most tests' data lives in
    a transaction it cannot read.
    """
    settings.SUPERVISOR_EXECUTOR = "inprocess"


class Migrations:
    """Moves a test's database back to an earlier migration and forward again (see the ``migrations`` fixture)."""

    def __init__(self) -> None:
        from django.db import connection
        from django.db.migrations.executor import MigrationExecutor

        self.executor = MigrationExecutor(connection)
        self._copy: tuple[str, contextlib.ExitStack] | None = None

    def back_to(self, migration: tuple[str, str]) -> Any:
        """Migrate back to ``migration``; its historical apps, to store rows as they were then. The first call moves
        the test's connection, until the test ends, onto a copy of the run's migrated database where there is one
        (:func:`tests.migration_moves.copy_latest`; a test's rows stored before are not there): the test database
        stays at the latest migrations, so a test need only migrate as far as it asserts (:meth:`forward_to`)."""
        if self._copy is None:
            from tests.migration_moves import copy_latest

            name = copy_latest()
            if name is not None:
                self._switch(name)
        self.executor.migrate([migration])
        self.executor.loader.build_graph()
        return self.executor.loader.project_state([migration]).apps

    def installed_at(self, *targets: tuple[str, str | None]) -> Any:
        """The test's connection, until the test ends, on a database of its own as ``manage.py migrate`` installed
        it at ``targets`` (one of :data:`tests.migration_moves.STATES`: every migration but the later ones of the
        targets' apps and those that depend on them; ``(app, None)``: none of the app's), its ``post_migrate`` content
        types and permissions included; the historical apps of the named migrations, as :meth:`back_to`. Rows stored
        in the test database before are not there; the test database itself is left as it is, at the latest
        migrations. Cheaper than :meth:`back_to` (:func:`tests.migration_moves.copy_installed_at`)."""
        from django.db import connection

        from tests.migration_moves import copy_installed_at

        assert self._copy is None, "one database of an earlier state a test"
        if connection.vendor != "postgresql":
            pytest.skip("proves the migrations on PostgreSQL, whose templates copy a database of an earlier state")
        self._switch(copy_installed_at(targets))
        return self.executor.loader.project_state([target for target in targets if target[1] is not None]).apps

    def _switch(self, name: str) -> None:
        """The test's connection on the database ``name`` until the test ends (then dropped)."""
        from django.db import connection
        from django.db.migrations.executor import MigrationExecutor

        from tests.migration_moves import connected_to

        switched = contextlib.ExitStack()
        self._copy = (name, switched)
        switched.enter_context(connected_to(name))
        self.executor = MigrationExecutor(connection)

    def forward_to(self, migration: tuple[str, str]) -> Any:
        """Apply ``migration`` and what it needs, no more; its historical apps, to read the rows as it left them.

        For a data migration's own test on a copy (:meth:`installed_at`, :meth:`back_to`; dropped after the test, so
        nothing need migrate further): from an early state, the latest is a hundred migrations on, ~15 s of CPU of
        rendering the project's state after each of their operations, which proves nothing of the migration under
        test. (On the test database itself, SQLite without a migrated copy, the rest is migrated after the test.)"""
        self.executor.loader.build_graph()
        self.executor.migrate([migration])
        self.executor.loader.build_graph()
        return self.executor.loader.project_state([migration]).apps

    def forward(self) -> None:
        """Migrate to the latest state (every other test expects it)."""
        from django.contrib.contenttypes.models import ContentType

        self.executor.loader.build_graph()
        self.executor.migrate(self.executor.loader.graph.leaf_nodes())
        ContentType.objects.clear_cache()

    def close(self) -> None:
        """The test database at the latest state again: the connection back on it (and the copy of
        :meth:`installed_at` or :meth:`back_to` dropped), or the test database migrated forward."""
        if self._copy is None:
            self.forward()
            return
        from tests.migration_moves import drop_database

        name, switched = self._copy
        self._copy = None
        switched.close()
        drop_database(name)


@pytest.fixture
def migrations():
    """A data migration's test: ``migrations.back_to(("app", "000N_name"))`` (or ``installed_at``, cheaper, for the
    states the suite's tests start from) returns the apps of then, rows are made with them, ``migrations.forward()``
    runs what came after (or, on a database of ``installed_at``, ``forward_to(migration)`` only the migration under
    test, returning the apps it left); the latest state comes back after the test whatever happens. Needs
    ``django_db(transaction=True)``."""
    moves = Migrations()
    yield moves
    moves.close()


@pytest.fixture
def spans():
    """This process's spans go to the SDK's in-memory exporter for the test (no global provider is touched)."""
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from common.infra import tracing

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracing.tracing_use(provider)
    yield exporter
    tracing.tracing_use(None)
    provider.shutdown()
