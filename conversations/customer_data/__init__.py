"""A customer's data on request: everything stored about one end user of a tenant, exported as one JSON document or
erased everywhere (:mod:`.registry` says where it is and what erasure does to each table).

The door other apps import: the faces (``chat/customer_apis.py``) and the commands go through these names.
"""

from conversations.customer_data.registry import HOLDERS, NO_CUSTOMER_DATA, NOT_PER_TENANT, Customer, Erase, Holder

__all__ = ["HOLDERS", "NOT_PER_TENANT", "NO_CUSTOMER_DATA", "Customer", "Erase", "Holder"]
