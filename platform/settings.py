"""Django settings, read from the environment (see ``.env.example``)."""

from __future__ import annotations

import os
from pathlib import Path

import dj_database_url
from django.core.exceptions import ImproperlyConfigured

from platform import env

BASE_DIR = Path(__file__).resolve().parent.parent
VAR_DIR = Path(env.string("VAR_DIR", str(BASE_DIR / "var")))
VAR_DIR.mkdir(parents=True, exist_ok=True)  # the embedded SQLite database and file cache live here
# numba (the examples tier's compiled loops, routing/examples_kernel.py) caches its machine code on disk; next to
# the source it cannot in the image (/app is root's, the app user's home too), and without a writable place the
# import fails. It is read when numba is first imported, which is after the settings.
os.environ.setdefault("NUMBA_CACHE_DIR", str(VAR_DIR / "cache" / "numba"))

DEBUG = env.boolean("DJANGO_DEBUG", True)
# The hand-written fast paths off: each runs its library's own code instead, chosen here (the database and cache
# backends) or at start-up (the ASGI handler, the span pipeline, the async views' dispatch): common/infra,
# docs/decisions/.
STOCK_PATHS = env.boolean("STOCK_PATHS", False)
SECRET_KEY = env.string("DJANGO_SECRET_KEY")
if not SECRET_KEY:
    if not DEBUG:
        raise ImproperlyConfigured("DJANGO_SECRET_KEY must be set when DJANGO_DEBUG is off.")
    SECRET_KEY = "dev-only-insecure-key-never-use-in-production"  # noqa: S105

ALLOWED_HOSTS = env.listing("DJANGO_ALLOWED_HOSTS", ["localhost", "127.0.0.1", "[::1]", "testserver"])
CSRF_TRUSTED_ORIGINS = env.listing("DJANGO_CSRF_TRUSTED_ORIGINS")

# HTTPS in production (`manage.py check --deploy` is clean with DJANGO_DEBUG=false): HSTS, secure cookies and a
# redirect to https, each configurable; behind a TLS-terminating proxy, DJANGO_SECURE_PROXY_SSL_HEADER names the
# header it sets (e.g. X-Forwarded-Proto), and only that proxy may reach the app. Health routes are never
# redirected: load balancers probe them over plain HTTP.
SECURE_SSL_REDIRECT = env.boolean("DJANGO_SECURE_SSL_REDIRECT", not DEBUG)
SECURE_REDIRECT_EXEMPT = [r"^api/health(/|$)"]
SECURE_HSTS_SECONDS = env.integer("DJANGO_SECURE_HSTS_SECONDS", 0 if DEBUG else 31_536_000)
SECURE_HSTS_INCLUDE_SUBDOMAINS = env.boolean("DJANGO_SECURE_HSTS_INCLUDE_SUBDOMAINS", not DEBUG)
SECURE_HSTS_PRELOAD = env.boolean("DJANGO_SECURE_HSTS_PRELOAD", False)
# Preloading commits the whole domain to HTTPS in browsers for good: the operator opts in, so its reminder is off.
SILENCED_SYSTEM_CHECKS = [] if SECURE_HSTS_PRELOAD else ["security.W021"]
SESSION_COOKIE_SECURE = env.boolean("DJANGO_SECURE_COOKIES", not DEBUG)
CSRF_COOKIE_SECURE = SESSION_COOKIE_SECURE
_proxy_ssl_header = env.string("DJANGO_SECURE_PROXY_SSL_HEADER")
if _proxy_ssl_header:
    # "X-Forwarded-Proto" → ("HTTP_X_FORWARDED_PROTO", "https"), the form Django reads.
    SECURE_PROXY_SSL_HEADER = ("HTTP_" + _proxy_ssl_header.upper().replace("-", "_"), "https")

INSTALLED_APPS = [
    "common.admin_apps.PlatformAdminConfig",  # django.contrib.admin, its site reading text with plain line ends
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    "drf_spectacular",
    "drf_spectacular_sidecar",  # Swagger UI's files, served locally (no CDN)
    "channels",
    "common.history.apps.RoutingChangesConfig",  # django-auditlog: the routing models' field history; before "common"
    # The product's apps, lowest layer first (docs/architecture.md): each imports only the ones above it here.
    "common",
    "tenants",
    "handoffs",
    "agents",
    "knowledge",
    "routing",
    "conversations",
    "releases",
    "chat",
    "analytics",
]

# Under the ASGI server each of these is loaded as its async twin (platform/middleware.py): hooks that do no I/O
# run in the event loop instead of a thread each, and an API-key request skips the sessions and messages.
# WhiteNoise goes last (not second, as its docs suggest): under a WSGI server nothing changes, and static
# files are still served before any view runs.
MIDDLEWARE = [
    "platform.middleware.RequestMetricsMiddleware",  # requests per route, method and status, and their seconds
    "platform.gate.InputMiddleware",  # a NUL in the path or the query, or too many query fields: 400 naming it
    "platform.errors.DatabaseCircuitMiddleware",  # while the database is known to be down: 503 at once
    "django.middleware.security.SecurityMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "platform.errors.DatabaseUnavailableMiddleware",  # a view that hits a database outage answers 503
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "common.history.registry.HistoryActorMiddleware",  # the admin user becomes the actor of the field history's entries
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
]

ROOT_URLCONF = "platform.urls"
WSGI_APPLICATION = "platform.wsgi.application"
ASGI_APPLICATION = "platform.asgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

# SQLite only for the embedded quick start; PostgreSQL for tests and production.
DATABASES = {
    "default": dj_database_url.parse(
        env.string("DATABASE_URL", f"sqlite:///{VAR_DIR / 'db.sqlite3'}"),
        conn_max_age=env.integer("DATABASE_CONN_MAX_AGE", 0),
    )
}
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # Concurrent readers and one writer without "database is locked" under the ASGI server. A transaction takes the
    # write lock when it begins (IMMEDIATE): one that read first and then wrote after another thread committed (the
    # external desks' courier, a second request) would fail at once instead of waiting its turn.
    DATABASES["default"].setdefault("OPTIONS", {}).update(
        {
            "timeout": 20,
            "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
            "transaction_mode": "IMMEDIATE",
        }
    )
    # Tests on a file beside the database, as the product runs, not Django's shared-cache memory database: there
    # concurrent requests (a browser's) meet table locks that fail at once, which a file in WAL mode never raises.
    DATABASES["default"].setdefault("TEST", {}).setdefault("NAME", str(VAR_DIR / "test-db.sqlite3"))
    # Covering indexes' INCLUDE columns (the rollout guard's, for PostgreSQL) are plain indexes here: expected.
    SILENCED_SYSTEM_CHECKS = [*SILENCED_SYSTEM_CHECKS, "models.W040"]
elif env.boolean("DATABASE_POOL", True):
    # psycopg's pool, one per process. The ASGI handler gives every request a thread of its own, so
    # without a pool every request connects anew; the chat path hands its connection back before the
    # model call (conversations.graph), so a few per process serve hundreds of chats in flight. A small
    # pool also bounds how many threads query at once; 20 was no faster than 3 to 10 (docs/benchmarks.md).
    if DATABASES["default"]["CONN_MAX_AGE"]:
        raise ImproperlyConfigured("DATABASE_POOL replaces DATABASE_CONN_MAX_AGE; set one of them, not both.")
    DATABASES["default"].setdefault("OPTIONS", {})["pool"] = {
        "min_size": env.integer("DATABASE_POOL_MIN_SIZE", 2),
        "max_size": env.integer("DATABASE_POOL_MAX_SIZE", 5),
        "timeout": env.decimal("DATABASE_POOL_TIMEOUT", 10.0),
    }
    # Each pooled connection is checked as it is handed out (one poll of its socket; an empty query when something
    # arrived on it), and the whole pool when one fails (common/infra/postgresql): a PostgreSQL restart cuts the idle
    # ones without the process noticing, and each would fail a request with a 503 and open the database circuit
    # (common/infra/outages.py) although the database answers again. The price: a request at the start of an outage
    # waits the pool's timeout for its 503.
    DATABASES["default"]["CONN_HEALTH_CHECKS"] = env.boolean("DATABASE_HEALTH_CHECKS", True)
if DATABASES["default"]["ENGINE"] == "django.db.backends.postgresql":
    # Django's backend with the pool's checks above, a few rows inserted as VALUES, and the cursor that binds its
    # values on the server for the message path's statements (common/infra/postgresql), which PostgreSQL prepares from
    # their fifth run on a connection. Django's other statements carry their values in their text, never prepared.
    # 0 turns preparing off (a pooler in transaction mode that cannot keep prepared statements).
    # STOCK_PATHS: Django's own backend (docs/decisions/postgresql-backend.md).
    DATABASES["default"]["ENGINE"] = "django.db.backends.postgresql" if STOCK_PATHS else "common.infra.postgresql"
    prepare_threshold = env.integer("DATABASE_PREPARE_THRESHOLD", 5)
    DATABASES["default"].setdefault("OPTIONS", {})["prepare_threshold"] = prepare_threshold or None
# Once a request met a database outage, the process answers 503 at once for this long, then lets one request
# try (common/infra/outages.py); without it each request of the outage waits DATABASE_POOL_TIMEOUT for its 503.
DATABASE_OUTAGE_PAUSE_SECONDS = env.decimal("DATABASE_OUTAGE_PAUSE_SECONDS", 2.0)

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

REDIS_URL = env.string("REDIS_URL")

# Seconds the platform goes on without Redis after a failed call before it tries Redis again (common/infra/cache.py).
REDIS_OUTAGE_PAUSE_SECONDS = env.decimal("REDIS_OUTAGE_PAUSE_SECONDS", 3.0)

# The cache carries the routing-configuration version between processes (and the throttles' counts), so it
# must be shared: Redis when configured, otherwise a file cache on this machine. While Redis cannot be
# reached the cache answers as a miss (common/infra/cache.py); short timeouts keep an unanswering host cheap.
if REDIS_URL and STOCK_PATHS:  # Django's own Redis cache: an outage fails requests (docs/decisions/)
    CACHES = {
        "default": {
            "BACKEND": "django.core.cache.backends.redis.RedisCache",
            "LOCATION": REDIS_URL,
            "OPTIONS": {"socket_connect_timeout": 0.5, "socket_timeout": 1.0},
        }
    }
elif REDIS_URL:
    CACHES = {
        "default": {
            "BACKEND": "common.infra.cache.ResilientRedisCache",
            "LOCATION": REDIS_URL,
            "OPTIONS": {
                "socket_connect_timeout": 0.5,
                "socket_timeout": 1.0,
                "outage_pause": REDIS_OUTAGE_PAUSE_SECONDS,
            },
        }
    }
else:
    CACHES = {
        "default": {
            # Django's, its folder made once per process
            "BACKEND": (
                "django.core.cache.backends.filebased.FileBasedCache" if STOCK_PATHS else "common.infra.cache.FileCache"
            ),
            "LOCATION": env.string("CACHE_DIR", str(VAR_DIR / "cache")),
        }
    }

if REDIS_URL:
    # channels_redis waits for messages with BZPOPMIN for 5 s; redis-py 8 reads with a default 5 s socket timeout,
    # so under load the read gave up first and the socket's consumer died (bench/ws_bench.py). Read for longer.
    CHANNEL_LAYERS = {
        "default": {
            "BACKEND": "channels_redis.core.RedisChannelLayer",
            "CONFIG": {"hosts": [{"address": REDIS_URL, "socket_timeout": 30}]},
        }
    }
else:
    CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}

# Web worker processes of this server (platform.serve exports the count it runs to its workers): an in-memory channel
# layer reaches the sockets of one process only (common.W002, and /api/health says so).
WEB_CONCURRENCY = env.integer("WEB_CONCURRENCY", 1)

# Without REDIS_URL there is no broker: work that would go to Celery runs in-process.
CELERY_BROKER_URL = REDIS_URL or "memory://"
CELERY_RESULT_BACKEND = REDIS_URL or "cache+memory://"
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
# Pool processes of one `celery worker` (each holds its own database pool: docs/operations.md, "Connections").
# Unset: Celery's default, one per core the machine has — in a container, the host's cores, not the container's.
CELERY_WORKER_CONCURRENCY = env.integer("WORKER_CONCURRENCY", 0) or None
CELERY_RESULT_EXPIRES = env.integer("CELERY_RESULT_EXPIRES", 3600)
CELERY_TASK_SERIALIZER = "json"
CELERY_RESULT_SERIALIZER = "json"
CELERY_ACCEPT_CONTENT = ["json"]
# Fail fast when Redis is gone, so a supervisor plan runs in-process instead (conversations/fanout.py):
# publishing retries twice within ~0.4 s (Celery's default is three), the result store once (its default
# is 20 times a second apart, during which the request's thread waits), connecting gives up after 1 s.
CELERY_TASK_PUBLISH_RETRY_POLICY = {"max_retries": 2, "interval_start": 0, "interval_step": 0.2, "interval_max": 0.2}
CELERY_RESULT_BACKEND_TRANSPORT_OPTIONS = {
    "retry_policy": {"max_retries": 1, "interval_start": 0, "interval_step": 0.5, "interval_max": 0.5}
}
CELERY_BROKER_TRANSPORT_OPTIONS = {"socket_connect_timeout": 1.0}
CELERY_BROKER_CONNECTION_TIMEOUT = 2.0
CELERY_REDIS_SOCKET_CONNECT_TIMEOUT = 1.0

# Rollout plans: every ROLLOUT_EVALUATE_SECONDS Celery beat evaluates the running plans (docs/rollouts.md);
# without a broker the web server's own timer does. Each decision that moves a plan is posted to its webhook,
# signed with ROLLOUT_WEBHOOK_SECRET, a secret of its own (X-Platform-Signature: sha256=<HMAC of
# "<X-Platform-Timestamp>.<body>">); without it nothing is posted (check --deploy says so: releases.W001).
ROLLOUT_EVALUATE_SECONDS = env.decimal("ROLLOUT_EVALUATE_SECONDS", 60.0)
ROLLOUT_WEBHOOK_SECRET = env.string("ROLLOUT_WEBHOOK_SECRET")

# The outbound policy (common/outbound.py, docs/security.md "Outbound requests"): the addresses editors and
# operators set (rollout webhooks, external desks, remote backends, MCP servers, model endpoints) are refused on
# loopback, private, link-local and other internal networks, when saved and on every request, unless listed here:
# host, host:port, address, address:port ([v6]:port) or network (10.0.0.0/8), comma-separated.
OUTBOUND_ALLOWED = env.listing("OUTBOUND_ALLOWED")

# Conversations' outcomes (docs/analytics.md, "Outcomes"): every OUTCOMES_CLOSE_SECONDS the open conversations idle past
# their profile's abandon_after_minutes are decided, resolved or abandoned (conversations/outcomes.py).
OUTCOMES_CLOSE_SECONDS = env.decimal("OUTCOMES_CLOSE_SECONDS", 60.0)

# Retention (docs/security.md "Customer data", conversations/customer_data/retention.py): a conversation is kept
# RETENTION_DAYS after its last message (0: forever; a tenant may have its own), then purged with every row it left,
# every RETENTION_PURGE_SECONDS, RETENTION_PURGE_BATCH conversations per transaction with a rest between batches.
RETENTION_DAYS = env.integer("RETENTION_DAYS", 0)
RETENTION_PURGE_SECONDS = env.decimal("RETENTION_PURGE_SECONDS", 3600.0)
RETENTION_PURGE_BATCH = env.integer("RETENTION_PURGE_BATCH", 100)
RETENTION_PURGE_PAUSE_SECONDS = env.decimal("RETENTION_PURGE_PAUSE_SECONDS", 0.05)
RETENTION_PURGE_SHARE = env.decimal("RETENTION_PURGE_SHARE", 0.25)  # at most this share of its time in batches
RETENTION_PURGE_ROWS_PER_SECOND = env.decimal("RETENTION_PURGE_ROWS_PER_SECOND", 100.0)  # 0: as the share allows
# The purge runs in a thread this much nicer than its caller's (common/priority.py; 0: in the caller's, as it is).
RETENTION_PURGE_NICE = env.integer("RETENTION_PURGE_NICE", 10)
if RETENTION_DAYS < 0 or RETENTION_PURGE_BATCH < 1 or RETENTION_PURGE_PAUSE_SECONDS < 0:
    raise ImproperlyConfigured(
        "RETENTION_DAYS and RETENTION_PURGE_PAUSE_SECONDS must not be negative, RETENTION_PURGE_BATCH at least 1."
    )
if RETENTION_PURGE_ROWS_PER_SECOND < 0:
    raise ImproperlyConfigured("RETENTION_PURGE_ROWS_PER_SECOND must not be negative (0: no limit but the share).")
if not 0 < RETENTION_PURGE_SHARE <= 1:
    raise ImproperlyConfigured("RETENTION_PURGE_SHARE must be above 0 and at most 1.")
if not 0 <= RETENTION_PURGE_NICE <= 19:
    raise ImproperlyConfigured("RETENTION_PURGE_NICE must be from 0 (the caller's priority) to 19 (the lowest).")

# Operational events (docs/events.md, common/infra/bus.py): agent.completed, handoff.completed, rollout.rolled_back,
# backend.down/up. Published off the request path to the Channels layer (groups "events" and "events.<tenant>";
# on by default with Redis, which the web workers share) and, when EVENTS_WEBHOOK_URL is set, posted there signed
# with EVENTS_WEBHOOK_SECRET (X-Platform-Signature: sha256=<HMAC of "<X-Platform-Timestamp>.<body>">), retried
# EVENTS_WEBHOOK_RETRIES times, then logged.
EVENTS_CHANNEL_LAYER = env.boolean("EVENTS_CHANNEL_LAYER", bool(REDIS_URL))
EVENTS_WEBHOOK_URL = env.string("EVENTS_WEBHOOK_URL")
EVENTS_WEBHOOK_SECRET = env.string("EVENTS_WEBHOOK_SECRET")
EVENTS_WEBHOOK_RETRIES = env.integer("EVENTS_WEBHOOK_RETRIES", 3)
EVENTS_WEBHOOK_TIMEOUT = env.decimal("EVENTS_WEBHOOK_TIMEOUT", 5.0)
if EVENTS_WEBHOOK_URL and not EVENTS_WEBHOOK_SECRET:
    raise ImproperlyConfigured("EVENTS_WEBHOOK_URL needs EVENTS_WEBHOOK_SECRET: receivers check the signature.")

# External desks (docs/external-desk.md, conversations/desk/webhook.py): each change of an escalation whose profile
# names an external desk is posted to the desk's URL, signed with its secret, off the request path — by a Celery
# task when there is a broker ("auto" with REDIS_URL), else by a thread of the process — in order per escalation,
# retried DESK_WEBHOOK_RETRIES times with a pause doubling from DESK_WEBHOOK_RETRY_SECONDS (at most 5 minutes),
# then logged and dropped. A desk's secret may be named by an environment variable these patterns allow (never one of
# the platform's own secrets).
DESK_WEBHOOK_EXECUTOR = env.choice("DESK_WEBHOOK_EXECUTOR", ("auto", "celery", "inprocess"), "auto")
DESK_WEBHOOK_RETRIES = env.integer("DESK_WEBHOOK_RETRIES", 8)
DESK_WEBHOOK_RETRY_SECONDS = env.decimal("DESK_WEBHOOK_RETRY_SECONDS", 1.0)
EXTERNAL_DESK_ENV_ALLOWED = env.listing("EXTERNAL_DESK_ENV_ALLOWED", ["*_DESK_SECRET"])

# Knowledge (docs/knowledge.md): the most one uploaded file may weigh and a PDF may count in pages, and the most
# documents and passages one tenant's knowledge sources may hold (the sources shared by every tenant count together).
KNOWLEDGE_MAX_FILE_BYTES = env.integer("KNOWLEDGE_MAX_FILE_BYTES", 10_000_000)
KNOWLEDGE_MAX_PDF_PAGES = env.integer("KNOWLEDGE_MAX_PDF_PAGES", 500)
KNOWLEDGE_MAX_DOCUMENTS = env.integer("KNOWLEDGE_MAX_DOCUMENTS", 2_000)
KNOWLEDGE_MAX_PASSAGES = env.integer("KNOWLEDGE_MAX_PASSAGES", 200_000)
KNOWLEDGE_MAX_SYNONYM_TERMS = env.integer("KNOWLEDGE_MAX_SYNONYM_TERMS", 5_000)
# An uploaded file of at least this many bytes is read by a Celery worker where a broker is configured (REDIS_URL);
# a smaller one, and every one without a broker, in the request (knowledge/uploads.py).
KNOWLEDGE_QUEUE_FROM_BYTES = env.integer("KNOWLEDGE_QUEUE_FROM_BYTES", 262_144)

CELERY_BEAT_SCHEDULE = {
    "rollout-evaluate": {
        "task": "conversations.rollout_evaluate",
        "schedule": ROLLOUT_EVALUATE_SECONDS,
        "kwargs": {"interval": ROLLOUT_EVALUATE_SECONDS},  # the beat's own interval, whatever the worker's settings
    },
    "outcomes-close": {"task": "conversations.outcomes_close", "schedule": OUTCOMES_CLOSE_SECONDS},
    # Posts whose retry was lost (a worker stopped, a broker restarted) are taken up again.
    "desk-webhooks-sweep": {"task": "conversations.desk_webhooks_sweep", "schedule": 60.0},
    "retention-purge": {"task": "conversations.retention_purge", "schedule": RETENTION_PURGE_SECONDS},
    # PostgreSQL: agent_handoffs' partitions of the months ahead (handoffs/partitions.py); nothing on SQLite.
    "handoff-partitions": {"task": "handoffs.partitions_ensure", "schedule": 3600.0},
    # The analytics' closed days and the live day's closed hours, summed before a read would (analytics/services.py).
    "analytics-rollup": {"task": "analytics.rollup", "schedule": 300.0},
}

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
]

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
# What customers read in their language (pt, en, es): the catalogues under locale/, compiled and committed.
LOCALE_PATHS = [BASE_DIR / "locale"]
USE_TZ = True

STATIC_URL = "static/"
STATIC_ROOT = VAR_DIR / "static"
STATICFILES_DIRS = [BASE_DIR / "static"] if (BASE_DIR / "static").is_dir() else []
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "whitenoise.storage.CompressedStaticFilesStorage"},
}
WHITENOISE_USE_FINDERS = DEBUG

LOGIN_URL = "admin:login"

REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "tenants.auth.ApiKeyAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    "DEFAULT_SCHEMA_CLASS": "chat.schema_areas.AreaSchema",  # drf-spectacular's, each operation tagged with its area
    "EXCEPTION_HANDLER": "common.errors.exception_handler",
    # JSON only, size and depth bounded (common/parsers.py): the API reads no forms.
    "DEFAULT_PARSER_CLASSES": ["common.parsers.JSONParser"],
    # DRF's, encoding with orjson (common/infra/renderers.py); the browsable API as DRF has it.
    "DEFAULT_RENDERER_CLASSES": [
        "common.infra.renderers.JSONRenderer",
        "rest_framework.renderers.BrowsableAPIRenderer",
    ],
    # DRF's, its choice kept for a request like one it has answered (common/infra/negotiation.py).
    "DEFAULT_CONTENT_NEGOTIATION_CLASS": "common.infra.negotiation.RememberingNegotiation",
    "UNAUTHENTICATED_USER": None,
    # Per API key or staff user, in the shared cache; the rates are the API_*_RATE_PER_KEY settings below.
    "DEFAULT_THROTTLE_CLASSES": ["tenants.throttles.ApiRateThrottle"],
}

# --- Metrics (common/infra/metrics.py, chat/metrics.py) ----------------------------
# GET /metrics: Prometheus text for "Authorization: Bearer <METRICS_TOKEN>" (unset: no token is accepted) or a staff
# session with the debug right over every tenant; METRICS_ENABLED=false answers 404. Several processes (the web
# server's workers, Celery's) share their figures through PROMETHEUS_MULTIPROC_DIR, read by prometheus_client itself.
METRICS_ENABLED = env.boolean("METRICS_ENABLED", True)
METRICS_TOKEN = env.string("METRICS_TOKEN")
# Per-pod metrics (Kubernetes: pods share no volume): with a port, the process that supervises a pod's processes
# (python -m platform.serve, a Celery worker's main process) serves their figures, read from the pod's own
# PROMETHEUS_MULTIPROC_DIR, at http://METRICS_HOST:METRICS_PORT/metrics for the METRICS_TOKEN bearer; every pod is
# scraped (docs/operations.md, "Kubernetes"). 0: no such port (docker-compose: one shared directory, one scrape).
METRICS_PORT = env.integer("METRICS_PORT", 0)
METRICS_HOST = env.string("METRICS_HOST", "0.0.0.0")  # noqa: S104 — a pod's port, reached by its scraper

# --- Throttling (tenants/throttles.py) ---------------------------------------
# "<count>/<second|minute|hour|day>" or "off". Messages: every route that runs a turn (HTTP, SSE, WebSocket
# frames, /v1/chat/completions), per API key (one key usually carries all of a tenant's customers) and per end
# user's session (or user id, for a message naming no session); a tenant may set its own on its admin page. The
# other rate: every other API route.
API_MESSAGE_RATE_PER_KEY = env.string("API_MESSAGE_RATE_PER_KEY", "6000/minute")
API_MESSAGE_RATE_PER_SESSION = env.string("API_MESSAGE_RATE_PER_SESSION", "60/minute")
API_RATE_PER_KEY = env.string("API_RATE_PER_KEY", "1200/minute")
# This many wrong keys from one client address within the window lock it out: its wrong keys get 429 with no
# database lookup; valid keys still pass.
AUTH_FAILURE_LIMIT = env.integer("AUTH_FAILURE_LIMIT", 30)
AUTH_FAILURE_WINDOW_SECONDS = env.integer("AUTH_FAILURE_WINDOW_SECONDS", 600)
AUTH_LOCKOUT_SECONDS = env.integer("AUTH_LOCKOUT_SECONDS", 900)
# Proxies in front of the app that append to X-Forwarded-For; 0: the header is ignored, REMOTE_ADDR is the client.
TRUSTED_PROXY_COUNT = env.integer("TRUSTED_PROXY_COUNT", 0)

SPECTACULAR_SETTINGS = {
    "TITLE": "Agent routing platform API",
    "DESCRIPTION": (
        "Chat gateway, routing debug, sessions and analytics. Authenticate with `Authorization: Bearer <key>`."
    ),
    "VERSION": "1.0.0",
    "SERVE_INCLUDE_SCHEMA": False,
    # Swagger UI from drf-spectacular-sidecar's static files: /api/docs/ works offline, at a pinned version.
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    "POSTPROCESSING_HOOKS": [
        "drf_spectacular.hooks.postprocess_schema_enums",  # the default hook, kept
        "chat.schema.closed_request_bodies",
        "chat.schema_areas.area_tags",  # the areas' descriptions, in order: Swagger UI's sections
    ],
}

# Request limits (docs/api.md, Errors): a body over API_MAX_BODY_BYTES is a 413, JSON nested deeper than
# API_JSON_MAX_DEPTH a 400 (before it is decoded), a message's payload.context over API_MAX_CONTEXT_BYTES
# (as JSON) a 400 naming it.
DATA_UPLOAD_MAX_MEMORY_SIZE = env.integer("API_MAX_BODY_BYTES", 2_621_440)  # Django's default, 2.5 MiB
API_JSON_MAX_DEPTH = env.integer("API_JSON_MAX_DEPTH", 32)
API_MAX_CONTEXT_BYTES = env.integer("API_MAX_CONTEXT_BYTES", 65_536)
# Any other request's body (the admin's forms and YAML uploads, the pages): over it a 413 before it is read
# (platform/gate.py). Uploads count too, which Django's DATA_UPLOAD_MAX_MEMORY_SIZE leaves out.
PAGE_MAX_BODY_BYTES = env.integer("PAGE_MAX_BODY_BYTES", 16 * 1024 * 1024)
# A CSRF failure outside the admin and the pages is answered in the API's error shape (platform/errors.py).
CSRF_FAILURE_VIEW = "platform.errors.csrf_failure"

# --- Product knobs -----------------------------------------------------------
ROUTING_MODE = env.choice("ROUTING_MODE", ("router", "supervisor", "hybrid", "goal"))  # overrides every profile
MAX_INPUT_CHARS = env.integer("MAX_INPUT_CHARS", 4000)
SUPERVISOR_SPECIALIST_TIMEOUT_SECONDS = env.decimal("SUPERVISOR_SPECIALIST_TIMEOUT_SECONDS", 30.0)
# Where a supervisor plan's specialists run: Celery workers when REDIS_URL is set ("auto"), or in-process.
SUPERVISOR_EXECUTOR = env.choice("SUPERVISOR_EXECUTOR", ("auto", "celery", "inprocess"), "auto")
CONVERSATION_HISTORY_LIMIT = env.integer("CONVERSATION_HISTORY_LIMIT", 20)
# Agent Gateway: a message that has already crossed this many deployments (X-Gateway-Hops) calls no further
# remote backend (conversations/gateway.py): loop safety across deployments.
GATEWAY_MAX_HOPS = env.integer("GATEWAY_MAX_HOPS", 3)

# What an MCP server or a domain manifest may make the platform do is bounded here, whatever they say (docs/goals.md,
# "Limits"): a tool's output (UTF-8 JSON bytes; cut with a marker, stored cut: every tool call), a goal plan's steps,
# the items one list fans out into, the steps running at once for one turn and in one process, a plan's time, the
# answer (characters) and the answer's response (UTF-8 JSON bytes; the largest strings of its metadata are cut).
# Before any of it, a server's answer on the wire: one over MCP_RESPONSE_MAX_BYTES is not read and its call fails
# (agents/mcp_wire.py; the SDK's own limit for an event of a stream, given to JSON answers too; 0: the SDK's client).
MCP_TOOL_OUTPUT_MAX_BYTES = env.integer("MCP_TOOL_OUTPUT_MAX_BYTES", 16_384)
MCP_RESPONSE_MAX_BYTES = env.integer("MCP_RESPONSE_MAX_BYTES", 1_048_576)
# An image, audio or binary resource a tool returns is kept (the cache) for the faces to show by its link, up to this
# size and for this long (agents/mcp.py); a larger one is named in the result, not kept.
MCP_ATTACHMENT_MAX_BYTES = env.integer("MCP_ATTACHMENT_MAX_BYTES", 262_144)
MCP_ATTACHMENT_TTL_SECONDS = env.integer("MCP_ATTACHMENT_TTL_SECONDS", 86_400)
# The platform's public address (scheme://host[/prefix]) for the links it writes into answers (those attachments);
# blank: the address each client reached (the chat page's WebSocket: a path on the page's own origin).
PUBLIC_URL = env.string("PUBLIC_URL").rstrip("/")
# MCP servers that speak stdio, run by the platform as child processes (agents/mcp_stdio.py): a JSON object of
# command lines by name. A command line is code: it is declared here, never in the admin.
MCP_STDIO_SERVERS = env.string("MCP_STDIO_SERVERS", "")
GOAL_PLAN_MAX_STEPS = env.integer("GOAL_PLAN_MAX_STEPS", 40)
GOAL_FANOUT_MAX_ITEMS = env.integer("GOAL_FANOUT_MAX_ITEMS", 10)
GOAL_PLAN_MAX_CONCURRENCY = env.integer("GOAL_PLAN_MAX_CONCURRENCY", 8)
GOAL_PROCESS_MAX_CONCURRENCY = env.integer("GOAL_PROCESS_MAX_CONCURRENCY", 32)
GOAL_PLAN_TIMEOUT_SECONDS = env.decimal("GOAL_PLAN_TIMEOUT_SECONDS", 30.0)
ANSWER_MAX_CHARS = env.integer("ANSWER_MAX_CHARS", 8_000)
RESPONSE_MAX_BYTES = env.integer("RESPONSE_MAX_BYTES", 262_144)

# Traces (common/infra/tracing.py; on when OTEL_EXPORTER_OTLP_ENDPOINT is set, the OTEL_* variables are the SDK's): a
# graph node's span is exported when the node took at least this many milliseconds (0: every node's).
TRACING_NODE_MIN_MS = env.decimal("TRACING_NODE_MIN_MS", 0.0)
# A turn that makes no progress for this long (its process died) no longer holds up its conversation.
CONVERSATION_TURN_LEASE_SECONDS = env.decimal("CONVERSATION_TURN_LEASE_SECONDS", 300.0)
# How long a message POST's Idempotency-Key and its stored answer are kept (chat/idempotency.py).
IDEMPOTENCY_KEY_TTL_SECONDS = env.integer("IDEMPOTENCY_KEY_TTL_SECONDS", 86400)

# The analytics sum each closed UTC day once into daily totals (analytics/services.py) and read them instead
# of the day's rows; a day closes this long after midnight, once no running turn can still write to it.
ANALYTICS_ROLLUPS = env.boolean("ANALYTICS_ROLLUPS", True)
ANALYTICS_ROLLUP_GRACE_SECONDS = env.decimal("ANALYTICS_ROLLUP_GRACE_SECONDS", 600.0)

OPENAI_BASE_URL = env.string("OPENAI_BASE_URL")
OPENAI_API_KEY = env.string("OPENAI_API_KEY")
LLM_MODEL = env.string("LLM_MODEL")
LLM_TIMEOUT_SECONDS = env.decimal("LLM_TIMEOUT_SECONDS", 30.0)
LLM_MAX_RETRIES = env.integer("LLM_MAX_RETRIES", 2)
OFFLINE_LLM_LATENCY_MS = env.integer("OFFLINE_LLM_LATENCY_MS", 0)
# The environment variables a profile may name as its model key (shell-style patterns, comma-separated). The platform's
# own secrets are never allowed, whatever this says (agents.schemas.PLATFORM_SECRET_VARIABLES).
LLM_API_KEY_ENV_ALLOWED = env.listing("LLM_API_KEY_ENV_ALLOWED", ["*_API_KEY"])
# Optional endpoint for routing alone (the LLM classifier), e.g. a small fast model; else the one above.
ROUTER_LLM_BASE_URL = env.string("ROUTER_LLM_BASE_URL")
ROUTER_LLM_API_KEY = env.string("ROUTER_LLM_API_KEY")
ROUTER_LLM_MODEL = env.string("ROUTER_LLM_MODEL")
# Optional OpenAI-compatible embeddings endpoint for the examples tier (common/embeddings.py); empty = offline TF-IDF.
ROUTER_EMBEDDINGS_BASE_URL = env.string("ROUTER_EMBEDDINGS_BASE_URL")
ROUTER_EMBEDDINGS_API_KEY = env.string("ROUTER_EMBEDDINGS_API_KEY")
ROUTER_EMBEDDINGS_MODEL = env.string("ROUTER_EMBEDDINGS_MODEL", "text-embedding-3-small")
ROUTER_EMBEDDINGS_TIMEOUT = env.decimal("ROUTER_EMBEDDINGS_TIMEOUT", 5.0)
# What a retrieval model wants before a message (QUERY) and before an example (DOCUMENT); a message and an example
# are compared alike, so e5's advice is "query: " on both (docs/knowledge.md, "Vectors"). Empty: the text alone.
ROUTER_EMBEDDINGS_QUERY_PREFIX = env.string("ROUTER_EMBEDDINGS_QUERY_PREFIX")
ROUTER_EMBEDDINGS_DOCUMENT_PREFIX = env.string("ROUTER_EMBEDDINGS_DOCUMENT_PREFIX")
# The knowledge's vector search (knowledge/vectors.py, docs/knowledge.md): the router's endpoint unless
# KNOWLEDGE_EMBEDDINGS_BASE_URL names another (then its key is its own: the router's is never sent elsewhere).
KNOWLEDGE_EMBEDDINGS_BASE_URL = env.string("KNOWLEDGE_EMBEDDINGS_BASE_URL") or ROUTER_EMBEDDINGS_BASE_URL
KNOWLEDGE_EMBEDDINGS_API_KEY = env.string(
    "KNOWLEDGE_EMBEDDINGS_API_KEY",
    ROUTER_EMBEDDINGS_API_KEY if KNOWLEDGE_EMBEDDINGS_BASE_URL == ROUTER_EMBEDDINGS_BASE_URL else "",
)
KNOWLEDGE_EMBEDDINGS_MODEL = env.string("KNOWLEDGE_EMBEDDINGS_MODEL") or ROUTER_EMBEDDINGS_MODEL
KNOWLEDGE_EMBEDDINGS_TIMEOUT = env.decimal("KNOWLEDGE_EMBEDDINGS_TIMEOUT", 2.0)
# Before a question (QUERY) and before a passage (DOCUMENT), e5's "query: " and "passage: ". Never the router's, even
# on its endpoint and model: the routing compares texts of one kind (e5: "query: " on both sides), the knowledge a
# short question with a passage (e5: "query: " and "passage: "; bge: an instruction before the question alone).
KNOWLEDGE_EMBEDDINGS_QUERY_PREFIX = env.string("KNOWLEDGE_EMBEDDINGS_QUERY_PREFIX")
KNOWLEDGE_EMBEDDINGS_DOCUMENT_PREFIX = env.string("KNOWLEDGE_EMBEDDINGS_DOCUMENT_PREFIX")

MCP_TELECOM_PORT = env.integer("MCP_TELECOM_PORT", 8100)
MCP_RETAIL_PORT = env.integer("MCP_RETAIL_PORT", 8200)

# Every handler carries platform.logs.RedactFilter: no API key in a URL, no bearer token, no personal data
# (CPF, card, e-mail, phone) reaches a log line, whoever logged it; the Celery worker's handlers get it through
# platform/celery.py, uvicorn's through platform/serve.py.
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "filters": {
        "redact": {"()": "platform.logs.RedactFilter"},
        "mcp_answer_refused": {"()": "agents.mcp_wire.RefusedAnswerFilter"},
    },
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s %(message)s"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain", "filters": ["redact"]}},
    "root": {"handlers": ["console"], "level": env.string("LOG_LEVEL", "INFO")},
    "loggers": {
        # Django's own config also logs to the console; one line per event is enough.
        "django": {"handlers": ["console"], "level": "INFO", "propagate": False},
        "django.db.backends": {"level": "INFO"},
        # An MCP answer over MCP_RESPONSE_MAX_BYTES: the platform's warning says so, not the SDK's traceback.
        "mcp.client.streamable_http": {"filters": ["mcp_answer_refused"]},
    },
}
