"""The Django project package -- and, by necessity, the standard library's ``platform``.

Both ends of the house (docs/architecture.md): its settings, environment reader and Celery app are the bottom
layer and import no app; its URLs and servers (urls, asgi, wsgi, serve) are the top and include the apps.

A top-level package called ``platform`` shadows the standard-library module of
the same name whenever the project root comes first on ``sys.path`` (which it
must, for ``platform.settings`` to import). ``uuid``, Django, Celery, pytest and
many other libraries ``import platform`` and call ``platform.system()`` and
friends, so shadowing alone breaks them.

The fix lives here and nowhere else: we execute the standard library's own
``platform.py`` source into this package's namespace. Every public (and
private) name of the stdlib module then exists on this package, bound to the
real implementation, while ``platform.settings``, ``platform.asgi`` and the
other submodules still import normally because this is a package.

Entry points put the project root first on ``sys.path`` (``PYTHONPATH`` in
``scripts/``, the Dockerfile and ``docker-compose.yml``; the script directory
for ``manage.py``), so the first ``import platform`` in any process lands here.
``platform/tests/test_stdlib_shadowing.py`` proves the contract.
"""

import os as _os
import sysconfig as _sysconfig

_STDLIB_PLATFORM = _os.path.join(_sysconfig.get_paths()["stdlib"], "platform.py")

with open(_STDLIB_PLATFORM, encoding="utf-8") as _source:
    exec(compile(_source.read(), _STDLIB_PLATFORM, "exec"), globals())  # noqa: S102

del _source
