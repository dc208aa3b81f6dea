"""Who may change what by import: each change asks for the permission the admin asks for it.

A role's powers are the same on every path: what a user may not change in the admin's forms they may not change
by import. The writer records every change it makes as a :class:`Touch` (a created row, a changed field, a list
replaced, a prompt version added); :func:`rights_check` turns each one the user lacks the permission for into a
problem at its place in the files, and the import is refused whole. The check is on what changes, so files that
repeat what is stored (the draft zip imported back) pass whoever imports them.

Importing at all takes :data:`IMPORT_PERMISSION`, what the admin's import page asks. The permissions are Django's
model permissions (``add``/``change``/``delete`` of the row's model), and a profile's
model endpoint, model and key variable (:data:`agents.models.MODEL_ENDPOINT_FIELDS`) also need
:data:`agents.models.MODEL_ENDPOINT_PERMISSION`, as on the profile's admin page.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.contrib.auth import get_permission_codename
from django.db import models

from agents.models import MODEL_ENDPOINT_FIELDS, MODEL_ENDPOINT_PERMISSION, AgentProfile
from releases.configio.messages import ERROR_FORBIDDEN
from releases.configio.source import Node, Problems

VERBS = {"add": "create", "change": "change", "delete": "delete"}
# Opening the import page (and a command's import as a user): who edits the routing configuration.
IMPORT_PERMISSION = "routing.change_intent"


@dataclass(frozen=True)
class Touch:
    """One change an import makes, and the one permission it needs (a change may make several touches)."""

    permission: str
    node: Node
    verb: str


def touches(model: type[models.Model], action: str, node: Node, field: str = "") -> list[Touch]:
    """What ``action`` (add, change, delete) on a row of ``model`` needs; ``field`` the field it sets, if one."""
    opts = model._meta
    found = [Touch(f"{opts.app_label}.{get_permission_codename(action, opts)}", node, VERBS[action])]
    if model is AgentProfile and field in MODEL_ENDPOINT_FIELDS:
        found.append(Touch(MODEL_ENDPOINT_PERMISSION, node, VERBS[action]))
    return found


def rights_check(found: list[Touch], user: Any, problems: Problems) -> None:
    """Add a problem at each place where ``user`` lacks a permission a change there needs (all of them, in one
    message). ``user`` ``None`` is the operator at the shell (the management commands without ``--user``), who may
    change everything; an active superuser holds every permission."""
    if user is None:
        return
    missing: dict[tuple[str, tuple], tuple[Node, str, list[str]]] = {}
    for touch in found:
        if user.has_perm(touch.permission):
            continue
        _node, _verb, permissions = missing.setdefault(
            (touch.node.source.name, touch.node.path), (touch.node, touch.verb, [])
        )
        if touch.permission not in permissions:
            permissions.append(touch.permission)
    for node, verb, permissions in missing.values():
        problems.add(
            node,
            ERROR_FORBIDDEN.format(
                user=user.get_username(),
                verb=verb,
                permission_word="permission" if len(permissions) == 1 else "permissions",
                permissions=" and ".join(permissions),
            ),
        )
