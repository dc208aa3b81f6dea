"""Django's PostgreSQL compilers, with a few rows inserted as ``VALUES`` again.

Django 5.2 inserts two rows or more as ``SELECT * FROM UNNEST(%s::text[], …)``, one array per column: the plan is
the same for any number of rows, which pays off for hundreds of rows. A chat turn inserts two or three (its
messages), and psycopg builds each column's array text in Python: under load that was about a twentieth of the
server's CPU per message (docs/benchmarks.md). Up to :data:`VALUES_ROWS` rows go as ``VALUES`` rows instead.
"""

from __future__ import annotations

from typing import Any

from django.db.backends.postgresql.compiler import (
    SQLAggregateCompiler,
    SQLCompiler,
    SQLDeleteCompiler,
    SQLUpdateCompiler,
)
from django.db.backends.postgresql.compiler import SQLInsertCompiler as UnnestInsertCompiler
from django.db.models.sql.compiler import SQLInsertCompiler as BaseSQLInsertCompiler

__all__ = ["SQLAggregateCompiler", "SQLCompiler", "SQLDeleteCompiler", "SQLInsertCompiler", "SQLUpdateCompiler"]

VALUES_ROWS = 16


class SQLInsertCompiler(UnnestInsertCompiler):
    def assemble_as_sql(self, fields: Any, value_rows: Any) -> Any:
        if len(value_rows) <= VALUES_ROWS:
            return BaseSQLInsertCompiler.assemble_as_sql(self, fields, value_rows)
        return super().assemble_as_sql(fields, value_rows)
