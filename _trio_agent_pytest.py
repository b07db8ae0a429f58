"""trio_agent's pytest plugin (entry point ``pytest11``: ``trio_agent``): a ``cassette``
fixture and a ``cassette`` marker for recording agent sessions and replaying them in tests.

It lives at the top level, beside ``_trio_agent_launch.py``, so that loading it -- which
pytest does in every session of a project that installed trio_agent -- imports only
pytest and the standard library, never the ``trio_agent`` package (~0.2 s).

Theory of operation: the fixture builds a ``CassetteFixture``
(``trio_agent/testing/_cassette_fixture.py``)
for the test. Its cassette is named after the test -- ``cassettes/<module>/<test>.jsonl``
beside the test module (parametrized ids made file-safe) -- unless the marker or the
``cassette_config`` fixture names one. The record mode is ``--record-mode`` when given,
else the marker's or ``cassette_config``'s ``record_mode``, else ``none`` (a CI run
never records by accident). ``before_record`` and ``match`` (a ``ReplayMatch``, a
``RequestMatcher`` or a sequence of them) come from the marker, else from
``cassette_config`` (a fixture a conftest may override, returning a dict).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from trio_agent.testing import CassetteFixture

__all__ = ["cassette", "cassette_config", "pytest_addoption", "pytest_configure"]

_MODES = ("once", "new_episodes", "none", "all")
_OPTIONS = ("name", "path", "record_mode", "before_record", "match")


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("trio_agent", "trio_agent cassettes")
    group.addoption("--record-mode", action="store", default=None, choices=_MODES,
                    help="record agent sessions into cassettes: none (default: replay only), once (tests without "
                         "cassettes), new_episodes (sessions without one), all (record every session again)")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "cassette(name=None, *, path=None, record_mode=None, before_record=None, match=None): the trio_agent "
        "cassette of this test (see the cassette fixture)",
    )


@pytest.fixture
def cassette_config() -> dict[str, Any]:
    """Defaults for every ``cassette`` of the tests it reaches (override it in a
    conftest): ``record_mode``, ``before_record``, ``match``."""
    return {}


@pytest.fixture
def cassette(request: pytest.FixtureRequest, cassette_config: dict[str, Any]) -> CassetteFixture:
    """Record or replay the test's agent sessions: ``async with cassette.use(config) as
    config:`` around each (``docs/cassettes.md``)."""
    from trio_agent.testing._cassette_fixture import CassetteFixture

    settings = dict(cassette_config)
    marker = request.node.get_closest_marker("cassette")
    if marker is not None:
        if marker.args:
            settings["name"] = marker.args[0]
        settings.update(marker.kwargs)
    unknown = sorted(set(settings) - set(_OPTIONS))
    if unknown:
        raise pytest.UsageError(f"unknown cassette option(s) {', '.join(unknown)}; known: {', '.join(_OPTIONS)}")
    option = request.config.getoption("--record-mode")
    record_mode = option or settings.get("record_mode") or "none"
    return CassetteFixture(_path(request, settings), record_mode=record_mode,
                           before_record=settings.get("before_record"), match=settings.get("match"))


def _path(request: pytest.FixtureRequest, settings: dict[str, Any]) -> Path:
    module = Path(str(request.node.path))
    explicit = settings.get("path")
    if explicit is not None:
        path = Path(explicit)
        return path if path.is_absolute() else module.parent / path
    name = settings.get("name") or _file_safe(request.node.name)
    if not name.endswith(".jsonl"):
        name += ".jsonl"
    return module.parent / "cassettes" / module.stem / name


def _file_safe(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", name).strip("-.") or "cassette"
