"""Persistence: tables, engines, migrations and the hot SQL statements.

Imports nothing of gatecast's other packages. Importing the package itself imports
nothing: ``storage.revision`` (the schema a version needs) stays light for
``gatecast --version``; import what you use from its modules (docs/architecture.md,
"light packages").
"""
