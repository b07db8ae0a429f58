"""The built-in local scripted model, where it used to live: it is
``trio_agent._local_model`` now (outside the test kit, so that ``trio-agent run
--local`` starts without it); this name stays for code that imported it here."""

from __future__ import annotations

from .._local_model import LocalModel, serve_local_model

__all__ = ["LocalModel", "serve_local_model"]
