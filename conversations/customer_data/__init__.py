"""A customer's data on request: everything stored about one end user of a tenant, exported as one JSON document or
erased everywhere (:mod:`.registry` says where it is and what erasure does to each table); and a tenant's retention,
which purges conversations past its window with every row they left (:mod:`.retention`).

The door other apps import: the faces (``chat/customer_apis.py``) and the commands go through these names.
"""

from conversations.customer_data.erasure import customer_erase
from conversations.customer_data.export import ERROR_USER_ID, customer_export, customer_for, customer_of_tenant
from conversations.customer_data.registry import HOLDERS, NO_CUSTOMER_DATA, NOT_PER_TENANT, Customer, Erase, Holder
from conversations.customer_data.retention import Purge, retention_purge, retention_purge_all

__all__ = [
    "ERROR_USER_ID",
    "HOLDERS",
    "NOT_PER_TENANT",
    "NO_CUSTOMER_DATA",
    "Customer",
    "Erase",
    "Holder",
    "Purge",
    "customer_erase",
    "customer_export",
    "customer_for",
    "customer_of_tenant",
    "retention_purge",
    "retention_purge_all",
]
