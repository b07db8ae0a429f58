"""The two parsers under the known read-only table: shell words (what the shell will
pass to each program) and options (GNU getopt_long's reading of them)."""

from __future__ import annotations

import pytest

from trio_agent._tools._option_spec import operands, options
from trio_agent._tools._shell_words import Word, split_commands


def texts(line: str) -> list[list[str]] | None:
    commands = split_commands(line)
    return None if commands is None else [[word.text for word in words] for words in commands]


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("ls -la | wc -l && git status; pwd || true",
         [["ls", "-la"], ["wc", "-l"], ["git", "status"], ["pwd"], ["true"]]),
        ("ls|wc&&pwd", [["ls"], ["wc"], ["pwd"]]),
        ("cat 'a b' \"c \\\"d\\\" \\$e \\x\" f\\ g", [["cat", "a b", 'c "d" $e \\x', "f g"]]),
        ("echo 'a|b;c&&d' \"(x)\" '$(y)' '#z'", [["echo", "a|b;c&&d", "(x)", "$(y)", "#z"]]),
        ("echo ''", [["echo", ""]]),
        ("  ls\t-a  ", [["ls", "-a"]]),
    ],
)
def test_words_and_operators(line: str, expected: list[list[str]]) -> None:
    assert texts(line) == expected


@pytest.mark.parametrize(
    ("written", "word"),
    [
        ("src/*.py", Word("src/*.py", 4)), ("*", Word("*", 0)), ("'*'", Word("*")), ("\\*", Word("*")),
        ("'a'*", Word("a*", 1)), ("a{b,c}", Word("a{b,c}", 1)), ("[ab]", Word("[ab]", 0)), ("~", Word("~")),
        ("--include=*.py", Word("--include=*.py", 10)), ("x?", Word("x?", 1)),
    ],
)
def test_each_word_says_where_the_shell_may_expand_it(written: str, word: Word) -> None:
    assert split_commands(f"ls {written}") == [[Word("ls"), word]]


@pytest.mark.parametrize(
    "line",
    ["ls > f", "ls < f", "ls >| f", "cat <(x)", "ls $X", "ls ${X}", "ls $(x)", "ls `x`", 'ls "$X"', 'ls "`x`"',
     "ls $'x'", "(ls)", "ls &", "ls & pwd", "ls |& wc", "ls ;; pwd", "ls ;& pwd", "ls #x", "ls\nx", "ls\rx",
     "ls\x00", "ls\x7f", "ls 'x", 'ls "x', "ls \\", "", "  ", "; ls", "ls;", "ls &&", "| ls", "ls || || pwd"],
)
def test_anything_but_words_and_list_operators_is_refused(line: str) -> None:
    assert split_commands(line) is None


SPEC = options("rnc:w::", "lines= color[=] format=! quiet")


def parsed(*words: str) -> list[str] | None:
    """The operands :func:`operands` finds among ``words``, as the shell splits them."""
    commands = split_commands(" ".join(("x", *words)))
    assert commands is not None
    found = operands(SPEC, commands[0][1:])
    return None if found is None else [word.text for word in found]


@pytest.mark.parametrize(
    ("words", "expected"),
    [
        (("-rn", "a"), ["a"]),  # clustered flags
        (("a", "-r", "b"), ["a", "b"]),  # options after operands (GNU permutes)
        (("-c5", "a"), ["a"]), (("-c", "5", "a"), ["a"]), (("-rc", "5"), []),  # a value, attached or next
        (("-c", "-5"), []), (("-c", "-"), []),  # a negative number or `-` may be a value
        (("-w", "a"), ["a"]), (("-w8", "a"), ["a"]),  # an optional value only attached
        (("--lines=5",), []), (("--lines", "5"), []),
        (("--color", "a"), ["a"]), (("--color=never",), []),
        (("--format=x", "a"), ["a"]),
        (("--", "-r", "--lines"), ["-r", "--lines"]), (("-",), ["-"]),  # `--` ends options, `-` is an operand
        (("--quiet",), []),
        (("--help",), []), (("--version",), []),  # every GNU program's
        (("src/*",), ["src/*"]), (("--", "*"), ["*"]),  # expansions only where they stay operands
        (("--lines=*",), []),  # or in a --name=value's value
    ],
)
def test_options_are_read_as_getopt_long_reads_them(words: tuple[str, ...], expected: list[str]) -> None:
    assert parsed(*words) == expected


@pytest.mark.parametrize(
    "words",
    [
        ("-x",), ("-rx",), ("--unknown",), ("--line=5",), ("--li",),  # unknown, and abbreviations
        ("-c",), ("--lines",), ("-c", "-r"), ("-c", "--quiet"), ("--lines", "-x"),  # a value missing or an option
        ("--quiet=1",), ("--format", "x"), ("--format",),  # a value where none or only attached is allowed
        ("*",), ("-r*",), ("--col*",), ("--li*=5",), ("-c", "*"), ("--lines", "a*"),  # expansions
        ("-5",),  # not a count for this spec
    ],
)
def test_anything_else_is_refused(words: tuple[str, ...]) -> None:
    assert parsed(*words) is None


def test_counts_and_clustering_follow_the_spec() -> None:
    counted = options("n:q", digits=True, clustering=False, gnu=False)
    assert operands(counted, [Word("-5"), Word("-n5"), Word("-q")]) == []
    assert operands(counted, [Word("-qq")]) is None  # no clustering
    assert operands(counted, [Word("--help")]) is None  # not a GNU program
