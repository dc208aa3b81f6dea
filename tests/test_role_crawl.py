"""Every link a role is shown works for it: a crawler per role over the pages of an editor's day.

For each role — a routing editor, a release approver, an analyst, a person of the desk and a superuser — logged
in, with the tenant grant the role needs, over demo-like data (a profile with intents, a published version, a
candidate and a draft change, a running rollout plan and one that rolled itself back, conversations of two tenants
with messages, route decisions and ratings): the role's start pages are opened, every link (``href``) and every
form sent by GET (its address with its fields' values as the page fills them) that stays inside ``/admin/``,
``/analytics/``, ``/chat/`` or ``/desk/`` is collected, and each is followed — two levels from the admin index, one
from the other start pages. Each must answer 200, or redirect to a page that answers 200: never 403, 404 or 500, and
never to the login page.

A start page is one of the role's own: the index, a profile's page, the rollout view, a conversation's page (of the
granted tenant) and the inbox for those who may open them, the analytics dashboard for those who may read it, and the
desk for those who may answer as a person. What a role may not open must not be linked for it, and any such link fails
here.

Left out: the logout (it ends the session; Django's is a POST form anyway). No link performs an action on GET.
To stay fast (a few hundred requests for all the roles), one link of each kind is followed per role, the first
found: links that differ only in an object's id, or only in the values of their query's parameters (a list's order,
a filter's choice), are one kind (:func:`same_link`).

On SQLite (``sqlite_too``) only the superuser's crawl runs again: every kind of link another role is shown, the
superuser is shown too (checked here, on PostgreSQL, after the superuser's crawl), so its crawl opens every kind of
page any role opens, with every filter, order and search the lists offer — the SQL that could differ there. What the
other roles add is the same pages' permission checks (Python, alike on both) and their lists kept to the tenants they
may read (an ``__in`` of the tenants' ids). The other roles' crawls on SQLite cost 60 % of its time.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass, field
from html.parser import HTMLParser
from urllib.parse import parse_qsl, urlencode, urljoin, urlsplit, urlunsplit

import pytest
from django.contrib import admin
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from analytics.filters import analytics_may_read
from analytics.rollouts import can_view_rollouts
from chat.desk.page import desk_may_use
from conversations.feedback import feedback_give
from conversations.models import Message, MessageFeedback
from releases.models import RolloutPlan, RolloutPlanStatus, RoutingTestCase
from releases.rollout.guard import plan_start
from releases.versions import version_publish
from routing.models import Intent, Keyword
from routing.services import rollout_flag_set, rollout_tenant_override_set
from tenants.models import TenantGrant
from tests.adminkit import conversation_with_history

pytestmark = pytest.mark.django_db

INSIDE = ("/admin/", "/analytics/", "/chat/", "/desk/")
LEFT_OUT = ("/admin/logout/",)
LOGIN = "/admin/login/"
MAX_REDIRECTS = 5


class _Links(HTMLParser):
    """The ``href`` of every link and the address of every form sent by GET, with its fields as the page fills
    them, in page order."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.found: list[str] = []
        self._form: dict[str, object] | None = None
        self._select: str | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        attr = {name: value or "" for name, value in attrs}
        if tag == "a" and attr.get("href"):
            self.found.append(attr["href"])
        elif tag == "form":
            if attr.get("method", "get").lower() == "get":
                self._form = {"action": attr.get("action", ""), "fields": [], "selects": {}}
        elif self._form is not None and tag == "input" and attr.get("name") and not attr.get("disabled"):
            kind = attr.get("type", "text").lower()
            if kind in ("submit", "button", "image", "reset", "file"):
                return
            if kind in ("checkbox", "radio") and "checked" not in attr:
                return
            self._form["fields"].append((attr["name"], attr.get("value", "on" if kind == "checkbox" else "")))
        elif self._form is not None and tag == "select" and attr.get("name"):
            self._select = attr["name"]
        elif self._form is not None and tag == "option" and self._select is not None:
            chosen = self._form["selects"]
            value = attr.get("value", "")
            if self._select not in chosen or "selected" in attr:
                chosen[self._select] = value  # the first option, unless one is selected

    def handle_endtag(self, tag: str) -> None:
        if tag == "select":
            self._select = None
        elif tag == "form" and self._form is not None:
            fields = [*self._form["fields"], *self._form["selects"].items()]
            action = str(self._form["action"])
            self.found.append(f"{action}?{urlencode(fields)}" if fields else action or "?")
            self._form = None


def links_of(html: str, page: str) -> list[str]:
    """The addresses a page links to or sends a form to by GET, absolute paths with their query, inside
    :data:`INSIDE`, without fragments, each once."""
    parser = _Links()
    parser.feed(html)
    found: list[str] = []
    for href in parser.found:
        if href.startswith(("javascript:", "mailto:", "#")):
            continue
        parts = urlsplit(urljoin(page, href))
        if parts.netloc not in ("", "testserver"):
            continue
        url = urlunsplit(("", "", parts.path, parts.query, ""))
        if parts.path.startswith(INSIDE) and not parts.path.startswith(LEFT_OUT) and url not in found:
            found.append(url)
    return found


def same_link(url: str) -> str:
    """The kind of link ``url`` is: its path with every object id as ``<id>``, and the names of its query's
    parameters without their values (``?o=1`` and ``?o=-2``, ``?tenant__id__exact=1`` and ``=2`` are one kind)."""
    parts = urlsplit(url)
    path = "/".join("<id>" if segment.isdigit() else segment for segment in parts.path.split("/"))
    names = sorted({name for name, _ in parse_qsl(parts.query, keep_blank_values=True)})
    return f"{path}?{'&'.join(names)}" if names else path


@dataclass
class Crawl:
    """One role's crawl: each link followed once, the first page that showed it kept to name it."""

    client: Client
    seen: set[str] = field(default_factory=set)
    broken: list[str] = field(default_factory=list)
    followed: int = 0

    def open(self, url: str) -> tuple[str | None, str]:
        """Follow ``url`` (and its redirects): the final page's HTML, or ``None`` with what went wrong."""
        path = url
        for _ in range(MAX_REDIRECTS + 1):
            self.followed += 1
            response = self.client.get(path)
            if response.status_code in (301, 302, 303, 307, 308):
                target = urljoin(path, response["Location"])
                if urlsplit(target).path.startswith(LOGIN):
                    return None, f"redirects to the login page ({target})"
                path = target
                continue
            if response.status_code != 200:
                hop = f" (redirected to {path})" if path != url else ""
                return None, f"answers {response.status_code}{hop}"
            kind = response.get("Content-Type", "")
            return (response.content.decode() if kind.startswith("text/html") else ""), ""
        return None, f"redirects more than {MAX_REDIRECTS} times"

    def run(self, starts: list[tuple[str, int]]) -> None:
        """Open each start page and follow its links as many levels down as it says, breadth first (deepest start
        first), so that a link is followed from the first level it is seen on."""
        queue: deque[tuple[str, str, int]] = deque()
        for url, depth in sorted(starts, key=lambda start: -start[1]):
            self.seen.add(same_link(url))
            html, problem = self.open(url)
            if html is None:
                self.broken.append(f"the start page {url} {problem}")
            else:
                queue.append((url, html, depth))
        while queue:
            page, html, depth = queue.popleft()
            for link in links_of(html, page):
                key = same_link(link)
                if key in self.seen:
                    continue
                self.seen.add(key)
                found, problem = self.open(link)
                if found is None:
                    self.broken.append(f"{page} links {link}, which {problem}")
                elif depth > 1 and found:
                    queue.append((link, found, depth - 1))


# -- the data of an editor's day -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Day:
    profile_url: str
    rollout_view_url: str
    conversation_url: str  # tenant_a's


@pytest.fixture
def day(telecom, tenant, outsider, django_user_model) -> Day:
    """``telecom_contas`` published as version 1 by an operator, a candidate version 2 in a running rollout plan, a
    plan that rolled itself back this hour (the banner), a draft change, a saved routing test, the multi_agent flag
    at 10 % with a tenant override, and a conversation of each tenant with a rated answer."""
    operator = django_user_model.objects.create_user("operator", "operator@example.com", "pw", is_staff=True)
    rollout_flag_set(key="multi_agent", actor="admin: operator", user=operator, percentage=10)
    rollout_tenant_override_set(
        key="multi_agent", tenant_slug=outsider.slug, enabled=False, actor="admin: operator", user=operator
    )
    billing = Intent.objects.get(profile=telecom, name="billing_invoice_explanation")
    version_publish(profile=telecom, user=operator, note="first")
    Keyword.objects.create(intent=billing, text="cobranca indevida")
    candidate = version_publish(profile=telecom, note="more keywords", release=False)
    running = RolloutPlan.objects.create(
        name="more keywords", profile=telecom, candidate=candidate, created_by=operator
    )
    plan_start(running, actor="test")
    RolloutPlan.objects.create(
        name="an earlier try",
        profile=telecom,
        candidate=candidate,
        status=RolloutPlanStatus.ROLLED_BACK,
        finished_at=timezone.now(),
    )
    Keyword.objects.create(intent=billing, text="segunda via da conta")  # the draft differs from the live version
    RoutingTestCase.objects.create(
        profile=telecom,
        name="fatura alta",
        message="Minha fatura veio alta",
        expect={"intent": "billing_invoice_explanation", "agent": "billing_agent"},
    )
    conversations = [conversation_with_history(tenant=owner, profile=telecom) for owner in (tenant, outsider)]
    for conversation in conversations:
        answer = Message.objects.get(conversation=conversation, role="assistant")
        feedback_give(conversation=conversation, message_id=answer.pk, rating="down", comment="Não era isso.")
    return Day(
        profile_url=reverse("admin:agents_agentprofile_change", args=[telecom.pk]),
        rollout_view_url=reverse("analytics-rollout-page", args=[running.pk]),
        conversation_url=reverse("admin:conversations_conversation_change", args=[conversations[0].pk]),
    )


# -- the roles -------------------------------------------------------------------------------------------------


@pytest.fixture
def granted_editor(editor, tenant):
    """A routing editor who may read, chat as and debug ``tenant`` (the chat page and its draft version)."""
    TenantGrant.objects.create(
        tenant=tenant, user=editor, read_conversations=True, act_for_tenant=True, debug_tenant=True
    )
    return editor


@pytest.fixture
def granted_approver(approver, tenant):
    """A release approver who may read ``tenant``'s conversations."""
    TenantGrant.objects.create(tenant=tenant, user=approver, read_conversations=True)
    return approver


ROLES = {
    "superuser": "staff_user",  # first: the others' kinds of link are checked against its own
    "routing editor": "granted_editor",
    "release approver": "granted_approver",
    "analyst": "tenant_analyst",
    "desk person": "desk_person",  # staff who only answer as a person for tenant_a (tests/desk_fixtures.py)
}
EVERY_KIND = "superuser"  # the role shown every kind of link, whose crawl alone runs on SQLite as well
# The kinds of link each role was shown in this process, for the check that the superuser is shown them all.
SHOWN: dict[str, set[str]] = {}
# How many kinds of link a role is shown at least: a person of the desk is shown little (the index, the desk, the
# password change), the others the admin's lists.
FEWEST_LINKS = {"desk person": 3}


def start_pages(user, day: Day) -> Iterator[tuple[str, int]]:
    """The role's start pages and how deep to follow their links: the index two levels, the others one."""
    yield reverse("admin:index"), 2
    if user.has_perm("agents.view_agentprofile"):
        yield day.profile_url, 1
    if can_view_rollouts(user):
        yield day.rollout_view_url, 1
    if user.has_perm("conversations.view_conversation"):
        yield day.conversation_url, 1
    if admin.site.is_registered(MessageFeedback) and user.has_perm("conversations.view_messagefeedback"):
        yield reverse("admin:conversations_messagefeedback_changelist"), 1
    if analytics_may_read(user):
        yield reverse("analytics-dashboard"), 1
    if desk_may_use(user):
        yield reverse("desk"), 1


@pytest.mark.parametrize(
    "role", [pytest.param(role, marks=[pytest.mark.sqlite_too] if role == EVERY_KIND else []) for role in ROLES]
)
def test_every_link_a_role_is_shown_answers_200(request, role, day):
    user = request.getfixturevalue(ROLES[role])
    client = Client()
    client.force_login(user)
    crawl = Crawl(client)

    crawl.run(list(start_pages(user, day)))

    assert len(crawl.seen) > FEWEST_LINKS.get(role, 30), f"the {role} was shown almost nothing: {sorted(crawl.seen)}"
    assert (reverse("desk") in crawl.seen) == desk_may_use(user), f"the {role} is shown the desk: {sorted(crawl.seen)}"
    assert not crawl.broken, f"the {role} is shown links that do not work:\n" + "\n".join(crawl.broken)
    SHOWN[role] = crawl.seen
    # Where the superuser's crawl ran before in this process (xdist keeps a file on one worker, in order).
    beyond = crawl.seen - SHOWN.get(EVERY_KIND, crawl.seen)
    assert not beyond, f"the {role} is shown kinds of link the superuser is not, crawled on SQLite by nobody: {beyond}"
