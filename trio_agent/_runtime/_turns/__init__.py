"""A turn's life: its handles and state machine, the queue that accepts turns, the
runner that drives one turn at a time (its requests, tool calls, steers and mail), the
input waiting for a turn, and the lifecycle events each turn reports.

Nothing is imported here: importing a module of this package loads only that module
(and what it imports), so the lean-import budget of ``import trio_agent`` holds.
"""
