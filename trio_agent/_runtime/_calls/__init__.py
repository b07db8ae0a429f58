"""What the model's tool calls run inside the runtime: the dispatcher (user tools, the
built-in ``exec``/``wait`` and the namespaced groups), the calls of an ``exec`` cell,
the sandbox and approval policy of the agent's commands (``_permissions``),
``clock.sleep``, and the collaboration tools (mail, workers).

Nothing is imported here (see ``_turns/__init__.py``).
"""
