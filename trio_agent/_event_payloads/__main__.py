"""``python -m trio_agent._event_payloads > docs/events.md``: print the event reference."""

import sys

from ._doc import render

sys.stdout.write(render())
