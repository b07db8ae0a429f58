"""Known read-only commands: which command lines the ``untrusted`` policy runs unasked.

Theory of operation
-------------------
:func:`is_known_read_only` answers one question for ``plan_command``: under the
``untrusted`` approval policy, may this ``exec_command`` line run without asking the
user? It decides nothing else. The sandbox confines every command whether it was
asked about or not (a read-only command still cannot read what the sandbox hides, and
an approved one still cannot write outside it); the other policies never consult it.

"Known read-only" means: whatever the files and values, the line only reads files and
the system's state and prints to its output -- it writes no file, starts no other
program, changes no setting. It is decided by construction, on the line exactly as the
shell will see it:

1. the line must be plain words joined by ``&&``, ``||``, ``;`` and ``|``
   (:mod:`._shell_words`: no redirection, substitution, subshell, background job,
   comment; no variable expansion -- see below);
2. each command's name must be a key of the table below, written as a bare name (no
   path, no assignment before it, no expansion);
3. its arguments must pass that name's rule. Almost every rule is an allowlist of
   options (:mod:`._option_spec`: exact names, which take values and how, GNU
   parsing) plus a rule for the operands (``uniq`` at most one: a second one is its
   output file; ``date`` only ``+FORMAT``: any other operand sets the clock).
   ``find``, ``sed``, ``git`` and ``test`` have rules of their own (below).

Anything not understood -- an option missing from the table, a new syntax, an
abbreviated long option -- makes the line not known read-only, so it is asked about:
the table errs towards asking, never towards running.

Variable expansion is refused (``$`` outside single quotes): the checker cannot know
the value, and an unquoted one splits into words that may be options (``sort $X``). So
``cat $HOME/.ssh/id_rsa`` is asked about although it would only read (what it may read
is the sandbox's decision, not this table's); ``'$HOME'`` in single quotes is literal
text and passes. Globs stay (reading ``src/*.py`` is a read), but a word the shell may
expand into an option is refused: a file named ``--compress-program=x`` would turn
``sort *`` into running ``x``, so ``sort *`` is asked about and ``sort ./*`` or
``sort -- *`` is not.

Provenance. The list starts from codex's ``is_safe_command``
(``codex-rs/shell-command/src/command_safety/is_safe_command.rs``): ``cat cd cut echo
expr false grep head id ls nl paste pwd rev seq stat tail tr true uname uniq wc which
whoami``, ``base64`` without ``-o``, ``find`` without ``-exec -execdir -ok -okdir
-delete -fls -fprint -fprint0 -fprintf``, ``rg`` without ``--pre --hostname-bin
--search-zip -z``, ``sed -n {N|M,N}p``, ``tac`` (not its ``numfmt``). Codex takes most
of them with any arguments and denylists a few options; here every command has an
allowlist instead, read from each program's ``--help`` and manual: GNU coreutils 9.1,
grep 3.8, diffutils 3.8, findutils 4.9, sed 4.9, util-linux 2.38 (``column``,
``hexdump``, ``rev``), file 5.44, git 2.39, ripgrep 14 (its flag definitions; it is not
installed here). Each listed option's arity was checked by running the installed
program with and without a value (getopt's "requires an argument" and "doesn't allow
an argument", git's own messages). Added beyond codex: ``basename cmp column
comm date df diff dirname du file fmt fold hexdump md5sum od printenv readlink
realpath sha1sum sha256sum sort test [`` and read-only ``git`` subcommands (codex now
asks before every git command). Left out on purpose: ``strings`` (binutils expands
``@file`` arguments into options, even after ``--``), ``tree`` (``-o FILE`` writes,
``-R`` writes an HTML file into every directory, and its own parser could not be
checked), every wrapper that runs another command (``xargs env nice timeout command
exec time nohup sudo``...), and every interpreter.

What it does not promise: ``git`` runs programs its configuration names
(``core.fsmonitor``, filter and diff drivers, ``diff.external``); the sandbox keeps
``.git`` read-only for commands, so a model cannot plant them, but a repository that
arrived with such a ``.git/config`` runs them on ``git status``. A login shell's
startup files run before any command. Reads are reads: a read-only command may print
a secret the sandbox lets it read.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from ._option_spec import OperandRule, Rule, options
from ._option_spec import command_rule as _plain
from ._safe_git import GIT_SUBCOMMANDS
from ._shell_words import Word, split_commands

__all__ = ["is_known_read_only"]


def is_known_read_only(cmd: str) -> bool:
    """Whether every command of the line ``cmd`` is known read-only (module docstring)."""
    commands = split_commands(cmd)
    return commands is not None and all(_read_only(words) for words in commands)


def _read_only(words: Sequence[Word]) -> bool:
    name = words[0]
    rule = _COMMANDS.get(name.text)
    return rule is not None and (name.literal or name.text == "[") and rule(words[1:])


# -- operand rules -----------------------------------------------------------------------------


def _at_most(limit: int) -> OperandRule:
    """At most ``limit`` operands, none that the shell may turn into several."""
    return lambda found: len(found) <= limit and all(word.literal for word in found)


def _between(low: int, high: int) -> OperandRule:
    return lambda found: low <= len(found) and _at_most(high)(found)


def _date_format(found: Sequence[Word]) -> bool:
    """``date`` prints with ``+FORMAT``; any other operand (``MMDDhhmm``) sets the clock."""
    return _at_most(1)(found) and all(word.text.startswith("+") for word in found)


# -- commands with rules of their own ----------------------------------------------------------


def _data(arguments: Sequence[Word]) -> bool:
    """``echo``, ``true``, ``false``, ``expr``: no option reads or writes anything, every
    argument is data printed or compared (expanded file names included)."""
    return True


_ARITHMETIC_TESTS = frozenset({"-eq", "-ne", "-lt", "-le", "-gt", "-ge"})
_INTEGER = re.compile(r"-?[0-9]+")


def _test(arguments: Sequence[Word]) -> bool:
    """``test``/``[`` are shell builtins that can evaluate an argument as code: bash 5.2
    runs ``$(...)`` in the array subscript of ``test -v 'a[$(cmd)]'``; zsh evaluates the
    operands of ``-eq``... arithmetically (``[ 'PATH=0' -eq 0 ]`` assigns). So: literal
    words (no glob: a file name is text the checker never saw), none holding ``$`` or a
    backtick, no ``-v``/``-R``, and arithmetic comparisons only between integers."""
    texts = [word.text for word in arguments]
    # {text, *text}: the word itself (-v, -R) and each of its characters ($, `)
    if not all(word.literal for word in arguments) or any({"$", "`", "-v", "-R"} & {text, *text} for text in texts):
        return False
    compared = [
        texts[index + step] for index, text in enumerate(texts) if text in _ARITHMETIC_TESTS
        for step in (-1, 1) if 0 <= index + step < len(texts)
    ]
    return all(_INTEGER.fullmatch(operand) for operand in compared)


_SED_PRINT = re.compile(r"[0-9]+(,[0-9]+)?p")


def _sed(arguments: Sequence[Word]) -> bool:
    """Only ``sed -n Np FILE...`` and ``sed -n M,Np FILE...`` (codex's form): no other
    option (GNU sed permutes, so ``sed -n 1p -i f`` edits ``f``), no other script (``w``,
    ``e`` and ``s///w`` write or run)."""
    if len(arguments) < 2 or arguments[0].text != "-n" or not arguments[1].literal:
        return False
    if not _SED_PRINT.fullmatch(arguments[1].text):
        return False
    files = arguments[2:]
    return all(word.expansion != 0 and (word.text == "-" or not word.text.startswith("-")) for word in files)


# find: global options, paths, then an expression of these (GNU findutils 4.9 manual).
_FIND_GLOBAL = frozenset({"-H", "-L", "-P"})
_FIND_OPERATORS = frozenset({"(", ")", "!", ",", "-not", "-a", "-and", "-o", "-or"})
_FIND_NULLARY = frozenset(
    "-daystart -depth -follow -ignore_readdir_race -noignore_readdir_race -mount -noleaf -nowarn -warn -xdev "
    "-empty -executable -false -nogroup -nouser -readable -true -writable -ls -print -print0 -prune -quit "
    "-help --help -version --version".split()
)
_FIND_UNARY = frozenset(
    "-maxdepth -mindepth -regextype -amin -anewer -atime -cmin -cnewer -ctime -fstype -gid -group -ilname "
    "-iname -inum -ipath -iregex -iwholename -links -lname -mmin -mtime -name -newer -path -perm -regex "
    "-samefile -size -type -uid -used -user -wholename -xtype -context -printf".split()
)
_FIND_NEWER_XY = re.compile(r"-newer[aBcm][aBcmt]")


def _find(arguments: Sequence[Word]) -> bool:
    """``find`` with only the tests, options and actions above: no ``-exec``,
    ``-execdir``, ``-ok``, ``-okdir`` (run), ``-delete``, ``-fls``, ``-fprint``,
    ``-fprint0``, ``-fprintf`` (write), ``-files0-from``, ``-D``, ``-O``. No word of the
    expression may expand (``-name *`` can become ``-name -a -delete``)."""
    index = 0
    while index < len(arguments) and arguments[index].text in _FIND_GLOBAL:
        index += 1
    while index < len(arguments) and not _find_expression_starts(arguments[index].text):
        if arguments[index].expansion == 0:
            return False
        index += 1
    while index < len(arguments):
        word = arguments[index]
        index += 1
        if not word.literal:
            return False
        if word.text in _FIND_UNARY or _FIND_NEWER_XY.fullmatch(word.text):
            if index == len(arguments) or not arguments[index].literal:
                return False
            index += 1
        elif word.text not in _FIND_NULLARY and word.text not in _FIND_OPERATORS:
            return False
    return True


def _find_expression_starts(text: str) -> bool:
    return text.startswith("-") or text in _FIND_OPERATORS


def _git(arguments: Sequence[Word]) -> bool:
    """A listed subcommand first -- no global option before it (``-c``, ``-C``,
    ``--exec-path``, ``--git-dir``, ``--work-tree``, ``--config-env``, ``-p``...) -- then
    that subcommand's allowed options (:mod:`._safe_git`)."""
    if not arguments or not arguments[0].literal:
        return False
    rule = GIT_SUBCOMMANDS.get(arguments[0].text)
    return rule is not None and rule(arguments[1:])


# -- the table ---------------------------------------------------------------------------------

_CHECKSUM = options("bctzw", "binary check tag text zero ignore-missing quiet status strict warn")

_COMMANDS: Mapping[str, Rule] = {
    "[": _test,
    "base64": _plain(options("diw:", "decode ignore-garbage wrap="), _at_most(1)),
    "basename": _plain(options("as:z", "multiple suffix= zero")),
    "cat": _plain(options(
        "AbeEnstTuv", "show-all number-nonblank show-ends number squeeze-blank show-tabs show-nonprinting")),
    "cd": _plain(options("LPe@", gnu=False), _at_most(1)),
    "cmp": _plain(options("bi:ln:s", "print-bytes ignore-initial= verbose bytes= quiet silent"), _at_most(4)),
    "column": _plain(options(
        "tJdexLc:s:o:N:R:", "table json table-noheadings table-header-repeat fillrows keep-empty-lines "
        "output-width= separator= output-separator= table-columns= table-right=")),
    "comm": _plain(options(
        "123z", "check-order nocheck-order output-delimiter= total zero-terminated"), _at_most(2)),
    "cut": _plain(options(
        "b:c:d:f:nsz", "bytes= characters= delimiter= fields= complement only-delimited output-delimiter= "
        "zero-terminated")),
    "date": _plain(options(
        "d:r:uRI::", "date= reference= utc universal rfc-email iso-8601[=] rfc-3339= debug resolution"),
        _date_format),
    "df": _plain(options(
        "aB:hHiklPt:Tx:v", "all block-size= human-readable si inodes local no-sync output[=] portability total "
        "type= print-type exclude-type=")),
    "diff": _plain(options(
        "abBcC:dD:eEF:iI:nNpqrsS:tTuU:wW:x:yZ",
        "normal brief report-identical-files context[=] unified[=] ed rcs side-by-side width= left-column "
        "suppress-common-lines show-c-function show-function-line= label= expand-tabs initial-tab tabsize= "
        "suppress-blank-empty recursive no-dereference new-file unidirectional-new-file ignore-file-name-case "
        "no-ignore-file-name-case exclude= starting-file= ignore-case ignore-tab-expansion ignore-trailing-space "
        "ignore-space-change ignore-all-space ignore-blank-lines ignore-matching-lines= text strip-trailing-cr "
        "ifdef= minimal horizon-lines= speed-large-files color[=] palette=")),
    "dirname": _plain(options("z", "zero")),
    "du": _plain(options(
        "0abB:cDd:hHkLlmPSst:x", "null all apparent-size block-size= bytes total dereference-args max-depth= "
        "human-readable inodes dereference count-links no-dereference separate-dirs si summarize threshold= "
        "time[=] time-style= exclude= one-file-system")),
    "echo": _data,
    "expr": _data,
    "false": _data,
    "file": _plain(options(
        "bihLkNnr0se:F:", "brief mime mime-type mime-encoding apple extension keep-going dereference "
        "no-dereference no-buffer no-pad print0 raw special-files exclude= exclude-quiet= separator=")),
    "find": _find,
    "fmt": _plain(options(
        "cp:stuw:g:", "crown-margin prefix= split-only tagged-paragraph uniform-spacing width= goal=")),
    "fold": _plain(options("bsw:", "bytes spaces width=")),
    "git": _git,
    "grep": _plain(options(
        "EFGPe:f:iywxzsvVm:bnHhoqaId:D:rRLlcTZB:A:C:U",
        "extended-regexp fixed-strings basic-regexp perl-regexp regexp= file= ignore-case no-ignore-case "
        "word-regexp line-regexp null-data no-messages invert-match max-count= byte-offset line-number "
        "line-buffered with-filename no-filename label= only-matching quiet silent binary-files= text "
        "directories= devices= recursive dereference-recursive include= exclude= exclude-from= exclude-dir= "
        "files-without-match files-with-matches count initial-tab null before-context= after-context= "
        "context= group-separator= no-group-separator color[=] colour[=] binary", digits=True)),
    "head": _plain(options("c:n:qvz", "bytes= lines= quiet silent verbose zero-terminated", digits=True)),
    "hexdump": _plain(options(
        "bcCde:L::n:os:vx", "one-byte-octal one-byte-char canonical two-bytes-decimal two-bytes-octal "
        "two-bytes-hex color[=] format= length= skip= no-squeezing")),
    "id": _plain(options("aZgGnruz", "context group groups name real user zero")),
    "ls": _plain(options(
        "aAbBcCdDfFgGhHiI:klLmnNopqQrRsStT:uUvw:xXZ1",
        "all almost-all author escape block-size= ignore-backups color[=] directory dired classify[=] file-type "
        "format= full-time group-directories-first no-group human-readable si dereference-command-line "
        "dereference-command-line-symlink-to-dir hide= hyperlink[=] indicator-style= inode ignore= kibibytes "
        "dereference numeric-uid-gid literal hide-control-chars show-control-chars quote-name quoting-style= "
        "reverse recursive size sort= time= time-style= tabsize= width= context zero")),
    "md5sum": _plain(_CHECKSUM),
    "nl": _plain(options(
        "b:d:f:h:i:l:n:ps:v:w:", "body-numbering= section-delimiter= footer-numbering= header-numbering= "
        "line-increment= join-blank-lines= number-format= no-renumber number-separator= "
        "starting-line-number= number-width=")),
    "od": _plain(options(
        "A:j:N:S:t:vw::abcdfilosx", "address-radix= endian= skip-bytes= read-bytes= strings[=] format= "
        "output-duplicates width[=] traditional")),
    "paste": _plain(options("d:sz", "delimiters= serial zero-terminated")),
    "printenv": _plain(options("0", "null")),
    "pwd": _plain(options("LP", gnu=False), _at_most(0)),
    "readlink": _plain(options(
        "femnqsvz", "canonicalize canonicalize-existing canonicalize-missing no-newline quiet silent verbose zero")),
    "realpath": _plain(options(
        "emLPqsz", "canonicalize-existing canonicalize-missing logical physical quiet relative-to= relative-base= "
        "strip no-symlinks zero")),
    "rev": _plain(options()),
    "rg": _plain(options(
        "iswxvclnNoquLFPUaHIpb0S.e:f:g:t:T:m:A:B:C:M:j:d:r:E:",
        "ignore-case case-sensitive smart-case word-regexp line-regexp invert-match count count-matches "
        "files-with-matches files-without-match line-number no-line-number only-matching quiet unrestricted "
        "hidden no-hidden no-ignore no-ignore-vcs no-ignore-parent no-ignore-dot no-ignore-global "
        "no-ignore-exclude no-ignore-files follow no-follow fixed-strings pcre2 multiline multiline-dotall text "
        "binary with-filename no-filename pretty heading no-heading vimgrep json byte-offset column no-column "
        "trim null null-data files type-list stats no-messages no-config crlf passthru debug trace no-unicode "
        "line-buffered block-buffered one-file-system include-zero no-require-git glob-case-insensitive "
        "ignore-file-case-insensitive regexp= file= glob= iglob= type= type-not= type-add= type-clear= "
        "max-count= after-context= before-context= context= max-columns= threads= max-depth= replace= "
        "encoding= sort= sortr= max-filesize= ignore-file= path-separator= context-separator= "
        "field-match-separator= field-context-separator= color= colors= engine= dfa-size-limit= "
        "regex-size-limit=")),
    "sed": _sed,
    "seq": _plain(options("f:s:w", "format= separator= equal-width"), _between(1, 3)),
    "sha1sum": _plain(_CHECKSUM),
    "sha256sum": _plain(_CHECKSUM),
    # no -o/--output, -T/--temporary-directory, --compress-program, --files0-from, --random-source,
    # --batch-size
    "sort": _plain(options(
        "bdfgiMhnRrVcCk:msS:t:uz",
        "ignore-leading-blanks dictionary-order ignore-case general-numeric-sort ignore-nonprinting month-sort "
        "human-numeric-sort numeric-sort random-sort reverse sort= version-sort check[=] debug key= merge "
        "stable buffer-size= field-separator= parallel= unique zero-terminated")),
    "stat": _plain(options("Lfc:t", "dereference file-system cached= format= printf= terse")),
    "tac": _plain(options("brs:", "before regex separator=")),
    "tail": _plain(options(
        "c:n:fFqs:vz", "bytes= follow[=] lines= max-unchanged-stats= pid= quiet silent retry sleep-interval= "
        "verbose zero-terminated", digits=True)),
    "test": _test,
    "tr": _plain(options("cCdst", "complement delete squeeze-repeats truncate-set1"), _between(1, 2)),
    "true": _data,
    "uname": _plain(options(
        "asnrvmpio", "all kernel-name nodename kernel-release kernel-version machine processor hardware-platform "
        "operating-system"), _at_most(0)),
    # the second operand is an output file
    "uniq": _plain(options(
        "cdDf:is:uzw:", "count repeated all-repeated[=] skip-fields= group[=] ignore-case skip-chars= unique "
        "zero-terminated check-chars="), _at_most(1)),
    "wc": _plain(options("cmlLw", "bytes chars lines max-line-length words")),
    "which": _plain(options("a", gnu=False)),
    "whoami": _plain(options(), _at_most(0)),
}
