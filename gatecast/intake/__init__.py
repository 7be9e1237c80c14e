"""The intake: the process that receives the gateway's webhook, and the supervisor that
holds its listening socket.

* :mod:`.supervisor` (stdlib only): binds the public socket (or takes it from systemd),
  keeps it open, runs the handler with the socket inherited and restarts it at once when
  it dies; answers ``serve`` and ``gatecast stop`` on a control socket.
* :mod:`.handler`: the handler process: the webhook route and ``/healthz``, nothing
  else; every other request goes byte for byte to the web process (:mod:`.proxy`).

This package's ``__init__`` imports nothing: ``python -m gatecast.intake.supervisor``
starts in milliseconds and never loads the app.
"""
