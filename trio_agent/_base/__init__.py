"""The configuration layer's own values (docs/architecture.md, "Layers").

``policies``: sandbox modes, approval policies and decisions, ``Sandbox``.
``approvals``: ``Approvals`` and the hook protocol. ``links``: what ``AgentConfig``
needs from higher layers, filled in by the package face. Nothing here imports a
module above the configuration layer at run time; this ``__init__`` imports nothing.
"""
