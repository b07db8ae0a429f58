"""``python -m trio_agent.cli._bench --serve SETTINGS``: the scripted server's child
process, as ``_server.open_bench_server`` starts it (``trio-agent bench``'s own command
line, whose hidden ``--serve`` runs ``_server.serve``)."""

from ._command import main

raise SystemExit(main())
