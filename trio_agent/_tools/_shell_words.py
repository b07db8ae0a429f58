"""The words of a shell command line, as far as a read-only check needs them.

Theory of operation: :func:`split_commands` understands a deliberately small part of
the sh/bash/zsh grammar -- words, quoted with ``'...'``, ``"..."`` or a backslash, and
the list operators ``&&``, ``||``, ``;`` and ``|`` -- and gives up (returns ``None``)
on anything else the shell could do with the text: an unquoted ``$`` or any backtick
(parameter, command and arithmetic expansion, ``$'...'``), ``<`` and ``>``
(redirections, here-documents, process substitution), ``(`` and ``)`` (subshells,
functions, extended globs, zsh glob qualifiers), ``&`` alone, ``|&``, ``;;``, ``#``
(a comment hides the rest of the line from the reader but not always from the shell),
and control characters (a newline is a command separator). Giving up only ever means
"not known read-only": the command is asked about, never run unchecked.

Globs and brace expansion (``*``, ``?``, ``[``, ``{``) stay: reading ``src/*.py`` is a
read. But the shell replaces such a word by file names the checker never sees, so each
:class:`Word` records where its first unquoted expansion character is. A word whose
expansion starts at its first character may become several words, any of them an
option (a file named ``--compress-program=x`` turns ``sort *`` into running ``x``),
and the option parser refuses it; ``./*`` or ``src/*`` can only become paths. Tilde
expansion (``~``, ``~/x``) yields one path and is accepted as written.
"""

from __future__ import annotations

import attrs

__all__ = ["Word", "split_commands"]

_OPERATOR_CHARS = frozenset("&|;")
_BLANKS = frozenset(" \t")
_WORD_END = _OPERATOR_CHARS | _BLANKS
_REFUSED = frozenset("<>()`$#")  # unquoted: see the module docstring
_EXPANSIONS = frozenset("*?[{")
_DOUBLE_QUOTE_ESCAPES = frozenset('$`"\\')


@attrs.frozen
class Word:
    """One word after quote removal. ``expansion``: the index in ``text`` of its first
    unquoted glob or brace character, if any (the shell may turn the word into others)."""

    text: str
    expansion: int | None = None

    @property
    def literal(self) -> bool:
        """Whether the shell passes ``text`` to the program as it is."""
        return self.expansion is None


def split_commands(line: str) -> list[list[Word]] | None:
    """The simple commands of ``line`` (each a non-empty list of words), or ``None``
    unless ``line`` is only words joined by ``&&``, ``||``, ``;`` and ``|``."""
    if any((ord(char) < 0x20 and char != "\t") or char == "\x7f" for char in line):
        return None
    commands: list[list[Word]] = [[]]
    index = 0
    while index < len(line):
        char = line[index]
        if char in _BLANKS:
            index += 1
        elif char in _OPERATOR_CHARS:
            size = _operator_size(line, index)
            if not size or not commands[-1]:
                return None  # `&`, `|&`, `;;`, or an operator with nothing before it
            commands.append([])
            index += size
        else:
            word, index = _word(line, index)
            if word is None:
                return None
            commands[-1].append(word)
    return commands if commands[-1] else None


def _operator_size(line: str, index: int) -> int:
    """2 for ``&&``/``||``, 1 for ``|``/``;``, 0 for anything else (``&`` alone)."""
    if line.startswith(("&&", "||"), index):
        return 2
    return 1 if line[index] in "|;" else 0


def _word(line: str, index: int) -> tuple[Word | None, int]:
    """The word starting at ``index`` and the index after it; ``None`` if it needs more
    of the shell than quoting (the module docstring)."""
    text: list[str] = []
    size = 0  # len("".join(text)), kept as we go
    expansion: int | None = None
    while index < len(line) and line[index] not in _WORD_END:
        char = line[index]
        if char == "'":
            end = line.find("'", index + 1)
            if end < 0:
                return None, index
            part, index = line[index + 1:end], end + 1
        elif char == '"':
            quoted, index = _double_quoted(line, index + 1)
            if quoted is None:
                return None, index
            part = quoted
        elif char == "\\":
            if index + 1 == len(line):
                return None, index
            part, index = line[index + 1], index + 2
        elif char in _REFUSED:
            return None, index
        else:
            if char in _EXPANSIONS and expansion is None:
                expansion = size
            part, index = char, index + 1
        text.append(part)
        size += len(part)
    return Word("".join(text), expansion), index


def _double_quoted(line: str, index: int) -> tuple[str | None, int]:
    """The text of a ``"..."`` whose body starts at ``index``, and the index after its
    closing quote; ``None`` if it expands something (``$``, a backtick) or never closes."""
    text: list[str] = []
    while index < len(line):
        char = line[index]
        if char == '"':
            return "".join(text), index + 1
        if char in "$`":
            return None, index
        if char == "\\" and index + 1 < len(line) and line[index + 1] in _DOUBLE_QUOTE_ESCAPES:
            text.append(line[index + 1])
            index += 2
        else:
            text.append(char)
            index += 1
    return None, index
