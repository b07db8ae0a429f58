"""``trio-agent exec``: one turn with codex exec's command line, printing its JSONL
events -- what ``@openai/codex-sdk`` drives, one process per turn.

``_command`` parses codex exec's options into an ``ExecRequest``; ``_run`` opens the
app server in this process and hands the request to ``_session``, which starts or
resumes the thread, drives the turn and turns its notifications into exec's events
(``_events``), printed as JSONL or for a human (``_output``). Private, like the rest
of ``trio_agent.cli``.
"""
