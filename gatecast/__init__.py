"""gatecast application layer: settings, the CLI, the HTTP app and the demo.

Dependencies point one way: ``gatecast`` -> ``scheduler`` -> ``campaigns`` ->
``storage`` and ``gateway``; ``storage`` and ``gateway`` import nothing of ours.
"""

__version__ = "0.1.0"
