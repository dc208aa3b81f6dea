# The platform image: web (uvicorn), Celery workers and the example MCP servers
# all run from it; docker-compose.yml picks the command.
FROM python:3.11-slim-bookworm

# PYTHONPATH: the project root must come first on sys.path (platform/ shadows the stdlib module).
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PYTHONPATH=/app \
    DJANGO_SETTINGS_MODULE=platform.settings \
    VAR_DIR=/app/var

WORKDIR /app

# A fixed uid, so Kubernetes can tell the user is not root (runAsNonRoot; deploy/kubernetes/).
RUN groupadd --system --gid 10001 app \
    && useradd --system --uid 10001 --gid app --home-dir /app --no-create-home app

COPY requirements.txt .
RUN pip install -r requirements.txt  # the runtime only: test tooling is in requirements-dev.txt

COPY . .

# The code's version, shown by /api/debug/env: `CODE_VERSION=$(git rev-parse --short HEAD) docker compose build`.
ARG CODE_VERSION=""
ENV CODE_VERSION=${CODE_VERSION}

# Static files are baked into the image and served by WhiteNoise. The key only
# lets settings load for collectstatic; it signs nothing.
RUN DJANGO_DEBUG=false DJANGO_SECRET_KEY=collectstatic-only python manage.py collectstatic --noinput \
    && mkdir -p /app/var/cache /app/var/metrics \
    && chown -R app:app /app/var

USER 10001:10001
EXPOSE 8000
CMD ["python", "-m", "platform.serve", "--host", "0.0.0.0", "--port", "8000"]
