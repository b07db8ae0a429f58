"""The configuration layer's own values (docs/architecture.md, "Layers").

``policies``: sandbox modes, approval policies and decisions, ``Sandbox``.
``approvals``: ``Approvals`` and the hook protocol; ``approval_request``: what the
hook is asked. ``auth``: the ChatGPT auth values. ``handle``: ``AgentHandle``, given to
a tools factory and to tools, with the protocols through which it names the agent.
``parts``: the protocols through which ``AgentConfig`` names the tools, rollout and
tracing settings it takes. ``links``: what ``AgentConfig`` calls in higher layers,
filled in by the package face. Nothing here imports a module above the configuration
layer, not even for a type checker; this ``__init__`` imports nothing.
"""
