"""Acceptance tests with real outside clients (issue 22): not collected unless every
client is installed -- ``bash .ci/clients`` installs them (pinned); ``.ci/run`` runs
``pytest tests/outsiders`` as a step of its own, where collecting nothing fails."""

from __future__ import annotations

from ._clients import missing

if missing():  # bash .ci/clients
    collect_ignore_glob = ["test_*.py"]
