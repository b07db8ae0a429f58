"""The written-out parameters of ``update_plan`` and ``web__run`` (``_tools/_nested_parameters``)
are the schemas their TypedDicts derive, key order included (the order is what the
model reads in ``exec``'s description)."""

from __future__ import annotations

import json
import subprocess
import sys

from trio_agent._tools._definitions import builtin_nested_tools
from trio_agent._tools._nested_parameters import UPDATE_PLAN_PARAMETERS, WEB_RUN_PARAMETERS
from trio_agent._tools._plan import plan_schema
from trio_agent._tools._web_search import commands_schema


def test_update_plan_parameters_are_the_derived_schema() -> None:
    assert json.dumps(UPDATE_PLAN_PARAMETERS) == json.dumps(plan_schema()), "update _nested_parameters.py from _plan.py"


def test_web_run_parameters_are_the_derived_schema() -> None:
    assert json.dumps(WEB_RUN_PARAMETERS) == json.dumps(commands_schema()), \
        "update _nested_parameters.py from _web_search.py"


def test_listing_the_nested_tools_imports_neither_module() -> None:
    code = ("import sys\nfrom trio_agent._tools._definitions import builtin_nested_tools\n"
            "builtin_nested_tools(web_search=True, image_generation=False, tool_search=False)\n"
            "print(sorted(m for m in sys.modules if m.startswith('trio_agent._tools._')))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60)
    loaded = out.stdout.strip()
    assert "_web_search" not in loaded and "_plan" not in loaded and "_schema" not in loaded, loaded
    names = [tool.name for tool in builtin_nested_tools(web_search=True, image_generation=False, tool_search=False)]
    assert names[-1] == "web__run" and "update_plan" in names
