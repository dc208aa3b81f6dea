"""The readers of each kind of YAML file the import takes, one module per kind; :mod:`releases.configio.parse`
tells a file's kind by its top-level keys."""
