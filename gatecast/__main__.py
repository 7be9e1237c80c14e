"""``python -m gatecast``: the command line (how ``serve`` starts its receiver process)."""

from gatecast.entry import main

main()
