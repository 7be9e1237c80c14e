"""The gateway boundary: typed client, outcome classification, event parsing, sandbox.

Imports nothing of gatecast's other packages. Importing the package itself imports
nothing: its modules are imported by name (``gateway.client``, ``gateway.events``,
``gateway.messages`` ...), so a command that reads a status event never loads the HTTP
client (docs/architecture.md, "light packages").
"""
