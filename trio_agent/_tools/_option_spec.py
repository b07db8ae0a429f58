"""A command's allowed options, and the parse that separates its operands from them.

Theory of operation: an :class:`OptionSpec` is an allowlist written the way the
programs themselves declare their options -- getopt's short string (``"ab:c::"``: ``-a``
a flag, ``-b`` takes a value, ``-c`` an optional value that must be attached) and long
names (``"all bytes= color[=] format=!"``: a flag, a value given as ``--bytes=N`` or
``--bytes N``, an optional value given only as ``--color=WHEN``, a value given only as
``--format=F``). :func:`operands` reads a command's words the way GNU ``getopt_long``
does (options may follow operands; ``-rn`` clusters flags; ``-n5``, ``-n 5``,
``--lines=5``, ``--lines 5`` give values; ``--`` ends the options; ``-`` is an operand)
and returns the operands, or ``None`` as soon as a word is not an allowed use of an
allowed option. Long names match exactly: ``--compress`` is not taken as an
abbreviation of anything (``getopt_long`` would expand it), so only the spelled-out
names in the table pass.

Two rules make a mismatch between this table and a program's real parser fail safe:

* a value given as the next word may not look like an option (``-x``; ``-`` and
  negative numbers such as ``-5`` are fine), so a flag the table wrongly believed to
  take a value cannot hide a following option from the check;
* a word the shell may still expand (:class:`~._shell_words.Word`) is accepted only
  where every expansion is harmless: as an operand whose first character is not the
  expansion (``src/*.py``, not ``*``; after ``--`` anything goes), or in the value of
  ``--name=value``; never as a short option, a long name, or a detached value (it may
  become several words).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from typing import Literal

import attrs

from ._shell_words import Word

__all__ = ["OperandRule", "OptionSpec", "Rule", "any_operands", "command_rule", "operands", "options"]

Kind = Literal["flag", "value", "optional", "attached"]
Rule = Callable[[Sequence[Word]], bool]
"""A command's arguments (the words after its name) -> read-only?"""
OperandRule = Callable[[Sequence[Word]], bool]
"""A command's operands (what :func:`operands` found) -> read-only?"""

_COLONS: tuple[Kind, ...] = ("flag", "value", "optional")  # getopt: "a", "a:", "a::"
_SUFFIXES: tuple[tuple[str, Kind], ...] = (("[=]", "optional"), ("=!", "attached"), ("=", "value"))


@attrs.frozen
class OptionSpec:
    """``short``/``long``: option name -> :data:`Kind`; ``digits``: ``-NUM`` (a count,
    ``head -5``, ``git log -3``) is allowed as a word of its own; ``clustering``: short
    flags may share a word (``-rn``)."""

    short: Mapping[str, Kind]
    long: Mapping[str, Kind]
    digits: bool = False
    clustering: bool = True


def options(short: str = "", long: str = "", *, digits: bool = False, clustering: bool = True,
            gnu: bool = True) -> OptionSpec:
    """An :class:`OptionSpec` from getopt-style strings (the module docstring); ``gnu``
    adds the ``--help`` and ``--version`` every GNU program has."""
    short_kinds = {name: _COLONS[len(colons)] for name, colons in re.findall(r"([^:])(:{0,2})", short)}
    long_kinds: dict[str, Kind] = {"help": "flag", "version": "flag"} if gnu else {}
    for spec in long.split():
        for suffix, kind in _SUFFIXES:
            if spec.endswith(suffix):
                long_kinds[spec.removesuffix(suffix)] = kind
                break
        else:
            long_kinds[spec] = "flag"
    return OptionSpec(short_kinds, long_kinds, digits=digits, clustering=clustering)


def any_operands(found: Sequence[Word]) -> bool:
    """Any number of operands (:func:`operands` refused those that may become options)."""
    return True


def command_rule(spec: OptionSpec, operand_rule: OperandRule = any_operands) -> Rule:
    """The rule of a command whose options are ``spec`` and operands ``operand_rule``."""

    def rule(arguments: Sequence[Word]) -> bool:
        found = operands(spec, arguments)
        return found is not None and operand_rule(found)

    return rule


def operands(spec: OptionSpec, words: Sequence[Word]) -> list[Word] | None:
    """The operands among ``words`` (the arguments after the command name), or ``None``
    if a word is not an allowed use of an option in ``spec`` (the module docstring)."""
    found: list[Word] = []
    ended = False
    index = 0
    while index < len(words):
        word = words[index]
        index += 1
        text = word.text
        if ended or text == "-" or not text.startswith("-"):
            if not ended and word.expansion == 0:
                return None  # it may expand to an option
            found.append(word)
            continue
        if text == "--":
            ended = True
            continue
        takes_next = _long(spec, word) if text.startswith("--") else _short(spec, word)
        if takes_next is None:
            return None
        if takes_next:
            if index == len(words) or not _detached_value(words[index]):
                return None
            index += 1
    return found


def _long(spec: OptionSpec, word: Word) -> bool | None:
    """Whether ``--name[=value]`` takes the next word as its value; ``None``: refused."""
    name, equals, _ = word.text[2:].partition("=")
    kind = spec.long.get(name)
    if kind is None or (word.expansion is not None and not (equals and word.expansion > len(name) + 2)):
        return None
    if kind == "flag":
        return None if equals else False
    if kind == "attached":
        return False if equals else None
    return kind == "value" and not equals


def _short(spec: OptionSpec, word: Word) -> bool | None:
    """Whether the cluster ``-abc`` ends with an option taking the next word; ``None``:
    refused."""
    text = word.text
    if not word.literal:
        return None
    if spec.digits and _is_count(text):
        return False
    for index in range(1, len(text)):
        kind = spec.short.get(text[index])
        rest = index + 1 < len(text)
        if kind is None or (kind == "flag" and rest and not spec.clustering):
            return None
        if kind == "value":
            return not rest
        if kind != "flag":  # an optional value: the rest of the word, if any
            return False if rest or kind == "optional" else None
    return False


def _detached_value(word: Word) -> bool:
    text = word.text
    return word.literal and (not text.startswith("-") or text == "-" or _is_count(text))


def _is_count(text: str) -> bool:
    """``-NUM``: a negative number, or the count shorthand of ``head -5``."""
    digits = text[1:]
    return text.startswith("-") and digits.isascii() and digits.isdigit()
