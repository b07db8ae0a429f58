"""Code mode: the `exec` / `wait` tools, model-written JavaScript in embedded QuickJS.

`CodeModeHost` (one per agent) runs cells; `ExecOutput` is what `exec` and
`wait` return; a `ToolCaller` runs the nested `tools.<name>(...)` calls and
raises `ToolCallError` to reject them. See `_host.py` and `_cells.py` for the
theory of operation and `_output.py` for the exact output formats.
"""

from ._cells import ToolCaller as ToolCaller
from ._cells import ToolCallError as ToolCallError
from ._host import CodeModeHost as CodeModeHost
from ._host import ExecOutput as ExecOutput
from ._output import format_failure as format_failure
from ._pragma import ExecSourceError as ExecSourceError
from ._pragma import parse_exec_source as parse_exec_source

__all__ = [
    "CodeModeHost",
    "ExecOutput",
    "ExecSourceError",
    "ToolCallError",
    "ToolCaller",
    "format_failure",
    "parse_exec_source",
]
