"""The read-only git subcommands and the options each may take (git 2.39).

Theory of operation: part of the known read-only table (:mod:`._safe_commands`, whose
docstring says what "known read-only" means). A git command line is read-only here
when its first argument is one of these subcommands -- no global option before it:
``-c``/``--config-env`` set configuration (``core.pager``, ``core.fsmonitor``...),
``-C``/``--git-dir``/``--work-tree`` point it elsewhere, ``--exec-path`` picks the
programs it runs, ``-p`` pages -- and every option after it is in that subcommand's
allowlist. Left out because they run a program or write a file: ``--output``
(``log``/``show``/``diff`` write it), ``--ext-diff`` and ``--textconv`` (run the
configured diff drivers), ``-O``/``--open-files-in-pager`` (``git grep`` runs it),
``--show-signature`` (runs gpg), ``--dirty``/``--broken`` (``describe`` refreshes the
index, ``--broken`` in a child process), ``--help`` (starts ``man``). Git's own
parsers match long names exactly in these subcommands' revision options but accept
abbreviations elsewhere; the allowlist matches exactly, so an abbreviation is asked
about.

Arities were checked against git 2.39: ``--format`` and ``--max-parents`` take their
value only as ``--format=F`` (``attached``), ``--stat``, ``--decorate``, ``--pretty``,
``--abbrev``, ``--color``, ``-U``/``--unified``, ``-M``, ``-C``, ``-B``... only attached
and optionally (``optional``), ``--author``, ``--since``, ``-n``, ``-S``, ``-G``, ``-L``...
also as the next word (``value``).
"""

from __future__ import annotations

from collections.abc import Mapping

from ._option_spec import Rule, command_rule, options

__all__ = ["GIT_SUBCOMMANDS"]

# The diff options shared by diff, log and show.
_DIFF_SHORT = "pusbwRzaWDS:G:U::M::C::B::"
_DIFF_LONG = (
    "patch no-patch raw name-only name-status numstat shortstat summary patch-with-stat patch-with-raw "
    "compact-summary minimal patience histogram no-color no-ext-diff no-textconv ignore-all-space "
    "ignore-space-change ignore-blank-lines ignore-space-at-eol ignore-cr-at-eol no-renames full-index binary "
    "text irreversible-delete function-context exit-code quiet check no-prefix pickaxe-regex pickaxe-all "
    "abbrev[=] color[=] word-diff[=] stat[=] dirstat[=] find-renames[=] find-copies[=] unified[=] relative[=] "
    "diff-filter= word-diff-regex= src-prefix= dst-prefix= line-prefix= "
)
# The revision and log options of log and show.
_LOG_SHORT = _DIFF_SHORT + "n:L:iEFP"
_LOG_LONG = _DIFF_LONG + (
    "oneline abbrev-commit no-abbrev-commit graph all merges no-merges first-parent reverse topo-order "
    "date-order author-date-order left-right cherry-pick cherry-mark cherry boundary simplify-by-decoration "
    "full-history dense sparse relative-date follow no-decorate source parents children cc regexp-ignore-case "
    "all-match invert-grep extended-regexp fixed-strings basic-regexp perl-regexp use-mailmap no-use-mailmap "
    "no-notes decorate[=] pretty[=] branches[=] tags[=] remotes[=] no-walk[=] format=! max-count= skip= "
    "since= after= until= before= author= committer= grep= date= glob= exclude="
)
_LOG = command_rule(options(_LOG_SHORT, _LOG_LONG, digits=True, gnu=False))

GIT_SUBCOMMANDS: Mapping[str, Rule] = {
    "blame": command_rule(options(
        "bfnpcltsewL:M::C::", "incremental root show-stats porcelain line-porcelain show-name show-number "
        "show-email minimal color-lines color-by-age date= abbrev[=] ignore-rev=", gnu=False)),
    "describe": command_rule(options(
        "", "contains all tags long first-parent always exact-match abbrev[=] candidates= match= exclude=",
        gnu=False)),
    "diff": command_rule(options(_DIFF_SHORT, _DIFF_LONG + "cached staged no-index merge-base", gnu=False)),
    "grep": command_rule(options(
        "vinwaIrEGFPhHlLzocqWpe:f:C:A:B:m:",
        "cached no-index untracked exclude-standard no-exclude-standard recurse-submodules invert-match "
        "ignore-case word-regexp text no-textconv recursive no-recursive extended-regexp basic-regexp "
        "fixed-strings perl-regexp line-number column full-name files-with-matches name-only "
        "files-without-match null only-matching count no-color break heading show-function function-context "
        "and or not all-match quiet color[=] max-depth= context= before-context= after-context= threads= "
        "max-count=", digits=True, gnu=False)),
    "log": _LOG,
    "ls-files": command_rule(options(
        "ztvfcdmoiskux:", "cached deleted modified others ignored stage killed directory no-empty-directory eol "
        "unmerged exclude-standard full-name recurse-submodules error-unmatch deduplicate abbrev[=] exclude= "
        "format=", gnu=False)),
    "rev-parse": command_rule(options(
        "q", "show-toplevel show-prefix show-cdup git-dir git-common-dir absolute-git-dir is-inside-work-tree "
        "is-inside-git-dir is-bare-repository is-shallow-repository show-superproject-working-tree verify "
        "quiet symbolic symbolic-full-name all short[=] abbrev-ref[=] branches[=] tags[=] remotes[=]",
        clustering=False, gnu=False)),
    "show": _LOG,
    "status": command_rule(options(
        "sbvzu::M::", "short branch show-stash ahead-behind no-ahead-behind long verbose null porcelain[=] "
        "untracked-files[=] ignored[=] ignore-submodules[=] column[=] no-column renames no-renames "
        "find-renames[=]", gnu=False)),
}
