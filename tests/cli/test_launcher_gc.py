"""The launcher imports the CLI with the cycle collector off, then freezes what the
import made and turns the collector on again, before the command runs
(``_trio_agent_launch._import_cli``): the CLI's modules are imported while it is off,
the command runs with it on, and the import's objects are in the frozen set -- also when
the import fails (the ``finally``)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from ._cli import cli_env

PROBE = """
import gc, json, sys
import _trio_agent_launch

seen = {}
WATCHED = ("trio_agent", "trio_agent.cli._main", "trio_agent._local_model")  # the last: by the run itself


class Probe:  # a meta path finder that only looks: is the collector on when these modules load?
    def find_spec(self, name, path, target=None):
        if name in WATCHED:
            seen[name] = gc.isenabled()
        return None


sys.meta_path.insert(0, Probe())
FAIL
code = _trio_agent_launch.main(["run", "--local", "--ephemeral", "hello"])
seen["after"] = gc.isenabled()
seen["frozen"] = gc.get_freeze_count()
seen["code"] = code
print(json.dumps(seen))
"""


def _run(tmp_path: Path, fail: str = "") -> str:
    env = cli_env(TRIO_AGENT_NO_DAEMON="1")
    done = subprocess.run([sys.executable, "-c", PROBE.replace("FAIL", fail)], env=env, cwd=tmp_path,
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip().splitlines()[-1]


def test_the_cli_is_imported_with_the_collector_off_and_runs_with_it_on(tmp_path: Path) -> None:
    seen = json.loads(_run(tmp_path))
    assert seen["trio_agent"] is False and seen["trio_agent.cli._main"] is False  # imported with it off
    assert seen["trio_agent._local_model"] is True and seen["after"] is True  # the run: on
    assert seen["frozen"] > 10_000  # the import's objects (~50,000)
    assert seen["code"] == 0


def test_a_failed_import_leaves_the_collector_on(tmp_path: Path) -> None:
    fail = ("sys.modules['trio_agent.cli._main'] = None\n"
            "try:\n    _trio_agent_launch.main(['run', '--local', 'hello'])\n"
            "except ImportError:\n    print(json.dumps([gc.isenabled(), gc.get_freeze_count() > 0]))\n"
            "    raise SystemExit(0)\n")
    assert _run(tmp_path, fail) == "[true, true]"
