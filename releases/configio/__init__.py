"""YAML import and export of routing, agent, tool and MCP-server configuration, and of domains' goals and capabilities.

The format is documented in ``docs/configuration.md``.
Management commands, ``seed_demo`` and the admin all go through these functions.
"""

from releases.configio.exporter import config_export, config_export_data, goals_file_name, routing_file_name
from releases.configio.importer import ConfigImportError, config_import
from releases.configio.source import Source
from releases.configio.world import ImportReport

__all__ = [
    "ConfigImportError",
    "ImportReport",
    "Source",
    "config_export",
    "config_export_data",
    "config_import",
    "goals_file_name",
    "routing_file_name",
]
