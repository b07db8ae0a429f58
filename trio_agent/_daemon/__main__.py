"""``python -m trio_agent._daemon DIR [--ready-fd FD]``: the daemon process, as
``trio-agent serve --daemon`` starts it (``_command``)."""

from ._server import main

raise SystemExit(main())
