"""The Celery application: ``celery -A platform worker``.

Celery finds this module as ``platform.celery``. It is not imported from
``platform/__init__.py`` on purpose: that package is also the standard
library's ``platform`` and is imported by ``uuid`` long before Django or
Celery are ready. Apps import :data:`app` where they define tasks.
"""

import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "platform.settings")

app = Celery("platform")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
