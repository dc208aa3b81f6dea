"""Every model that may hold a customer's data is known to the export and the erasure: a new table that stores a
user id, a conversation's rows or free text fails here until it is registered (conversations/customer_data/
registry.py) or listed with the reason it holds none."""

from __future__ import annotations

from django.apps import apps

from conversations.customer_data import HOLDERS, NO_CUSTOMER_DATA, NOT_PER_TENANT
from conversations.customer_data.registry import HOLDER_LABELS, holds_customer_data


def test_every_model_that_may_hold_customer_data_is_registered_or_listed_with_a_reason():
    known = HOLDER_LABELS | set(NO_CUSTOMER_DATA) | set(NOT_PER_TENANT)

    unknown = [
        model._meta.label
        for model in apps.get_models()
        if holds_customer_data(model) and model._meta.label not in known
    ]

    assert unknown == [], (
        "These models may hold a customer's data: add them to conversations/customer_data/registry.py (HOLDERS), "
        f"or to NO_CUSTOMER_DATA with the reason they hold none: {unknown}"
    )


def test_the_lists_name_installed_models_each_once_and_with_a_reason():
    labels = [holder.label for holder in HOLDERS]
    listed = [*labels, *NO_CUSTOMER_DATA, *NOT_PER_TENANT]
    assert len(listed) == len(set(listed))
    for label in listed:
        apps.get_model(label)  # raises LookupError for a model that went away
    assert all(reason.strip() for reason in [*NO_CUSTOMER_DATA.values(), *NOT_PER_TENANT.values()])
    # A listed model that the rule would not flag is a stale entry: its reason says nothing any more.
    assert [label for label in listed if not holds_customer_data(apps.get_model(label))] == []


def test_the_rule_flags_a_user_id_a_conversation_relation_and_free_text_but_not_counts():
    assert holds_customer_data(apps.get_model("routing.RolloutUserOverride"))  # user_id, nothing else
    assert holds_customer_data(apps.get_model("conversations.ConversationOutcome"))  # only its conversation
    assert holds_customer_data(apps.get_model("releases.RoutingTestCase"))  # source_message_id, message
    assert not holds_customer_data(apps.get_model("analytics.DailyMessages"))  # the daily totals: counts
    assert not holds_customer_data(apps.get_model("tenants.ApiKey"))


def test_each_holder_reaches_its_rows_one_way_and_erases_only_its_own_fields():
    for holder in HOLDERS:
        assert (holder.of_customer is None) != (holder.of_conversations is None), holder.label
        fields = {model_field.name for model_field in holder.model._meta.concrete_fields}
        assert set(holder.blank) | set(holder.kept_keys) | set(holder.values) <= fields, holder.label
