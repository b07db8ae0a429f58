"""Which command lines the ``untrusted`` policy runs unasked (issue 21, hole 6).

Table-driven through ``_policy.is_known_safe`` (the function ``plan_command`` asks):
hostile lines that run a program, write a file or change a setting are not known
read-only; ordinary reads are (the positive controls, so that a list refusing
everything cannot pass)."""

from __future__ import annotations

import pytest

import trio_agent as ta
from trio_agent._tools._policy import is_known_safe, plan_command

# The issue's three, each run without approval before the fix.
THE_ISSUE = [
    "git grep -O'touch pwned' needle",  # runs `touch pwned notes.txt`
    "sort -S 1K --compress-program=./p big.txt",  # runs ./p on the spilled temporaries
    "uniq /dev/null victim",  # truncates victim: the second operand is uniq's output file
]

HOSTILE = {
    "git": [
        "git -c core.pager=x log", "git -ccore.pager=x log", "git --config-env=core.pager=X log",
        "git -C /x status", "git --git-dir=/x status", "git --work-tree=/x status", "git --exec-path=/x status",
        "git -p log", "git --paginate log", "git --no-pager log",
        "git log --output=f", "git log --output f", "git show --output=f HEAD", "git diff --output=f",
        "git diff --ext-diff", "git log -p --ext-diff", "git show --textconv HEAD", "git grep --textconv x",
        "git grep --open-files-in-pager=x pat", "git grep -O x", "git grep -nOx pat", "git grep --open=x pat",
        "git log --show-signature", "git describe --dirty", "git describe --broken", "git log --help",
        "git diff -Oorder", "git log --outp=f",
        "git push", "git commit -m x", "git checkout f", "git stash", "git config core.pager x",
        "git branch -D x", "git fetch", "git archive -o f HEAD", "git format-patch -1", "git",
    ],
    "sort": [
        "sort --compress-program=p f", "sort --compress-program p f", "sort --compress=p f", "sort -o f g",
        "sort -of g", "sort -uo f g", "sort --output=f g", "sort f -o g", "sort -T d f",
        "sort --temporary-directory=d f", "sort --files0-from=f", "sort --batch-size=2 -m a b",
    ],
    "uniq": ["uniq a b", "uniq -c a b", "uniq a -- b", "uniq a*", "uniq {a,b}"],
    "find": [
        "find . -exec rm {} +", "find . -execdir sh -c x ';'", "find . -ok rm {} ';'", "find . -okdir rm {} ';'",
        "find . -delete", "find . -name x -delete", "find . -fls f", "find . -fprint f", "find . -fprint0 f",
        "find . -fprintf f %p", "find . -name *", "find * -name x", "find . -files0-from f", "find -D exec .",
    ],
    "rg": [
        "rg --pre x foo", "rg --pre=x foo", "rg --pre-glob '*' --pre x foo", "rg --hostname-bin x foo",
        "rg --hostname-bin=x foo", "rg -z foo", "rg --search-zip foo", "rg -nz foo",
    ],
    "sed": [
        "sed -i s/a/b/ f", "sed -n 1p -i f", "sed -n 1p --in-place f", "sed -ni 1p f", "sed e",
        "sed -n 1w out", "sed -n '1p;w out' f", "sed -n 1e f", "sed s/x/y/w f", "sed -n 1p -- -i",
    ],
    "other programs' writes": [
        "tree", "tree -o f", "du --files0-from=f", "file -C -m x", "file -C", "file -z f", "file -p f",
        "file -S f", "date -s now", "date --set=now", "date 010112002030", "date -u 0101", "df --sync",
        "strings f", "strings @opts",
    ],
    "test evaluates code": [
        "test -v 'a[$(touch x)]'", "[ -v 'a[$(touch x)]' ]", "test -R x", "[ 'a[$(touch x)]' -eq 1 ]", "test -f *",
        "[ 'PATH=0' -eq 0 ]", "test x -lt 1",
    ],
    "shell": [
        "ls |& touch x", "ls & touch x", "ls > f", "ls >| f", "ls >> f", "cat < f", "cat <<EOF", "cat <(touch x)",
        "ls $(touch x)", "ls `touch x`", 'ls "$(touch x)"', 'ls "`touch x`"', "echo $X", "echo ${X:=1}",
        "echo $((x=1))", "echo $'\\x41'", "cat $HOME/.ssh/id_rsa", "X=1 ls", "/bin/ls", "./ls", "(ls)", "{ ls; }",
        "ls; touch x", "ls && rm -rf x", "ls || rm x", "ls #; touch x", "ls\ntouch x", "ls\rtouch x",
        "ls 'unbalanced", 'ls "unbalanced', "ls \\", "", " ", ";", "ls;", "ls ;; ls", "ls |", "| ls", "! ls",
    ],
    "wrappers and writers": [
        "time ls", "command ls", "exec ls", "env ls", "xargs ls", "nice ls", "timeout 1 ls", "nohup ls",
        "sudo ls", "eval ls", "source x", ". x", "bash -c ls", "sh -c ls", "python -c 1", "awk 1 f",
        "perl -e 1", "vim f", "less f", "man ls", "tee f", "cp a b", "mv a b", "rm f", "touch f", "mkdir d",
        "ln -s a b", "chmod +x f", "dd if=a of=b", "tar xf a", "curl x", "make", "cd /tmp && ./run",
    ],
    "unknown or misused options": [
        "cat --unknown f", "ls -j", "grep --pre=x foo", "wc --files0-from=f", "head --lines", "head -n",
        "cut -d", "sort -k", "head -n -c f", "cd a b", "pwd x", "whoami x", "seq", "tr", "git log --format %h",
        "base64 -o out f", "base64 --output=out f",
    ],
    "expansion into options": [
        "sort *", "rg *", "cat *", "grep foo *", "ls [a-z]*", "cat {a,b}", "cat ?", "grep --include *.py foo .",
        "sort -{o,x}f g", "sort --{output,x}=f g", "ls --col*",
    ],
}

READ_ONLY = {
    "listing and reading": [
        "ls", "ls -la", "ls -la src", "ls -1 --color=never", "ls src/*.py", "ls -- *.py", "ls ~", "ls ~/x",
        "cat a b", "cat -n f", "cat 'a b' \"c d\" e\\ f", "cat '$HOME'", "head -n 5 f", "head -5 f",
        "head -n -5 f", "tail -n 20 f", "tail -f log", "wc -l f", "wc -l -- *", "nl -ba f", "tac f", "rev f",
        "od -c f", "od -An -tx1 f", "hexdump -C f", "file f", "file -b --mime-type f", "stat -c %s f",
        "readlink -f f", "realpath f", "basename a/b .py", "dirname a/b", "du -sh .", "du -d 1 -h", "df -h .",
        "md5sum f", "sha256sum -c sums", "base64 f", "base64 -d f", "cd src && ls", "which python3",
    ],
    "searching and filtering": [
        "grep -rn foo .", "grep -rn --include=*.py foo .", "grep -E 'a|b' f", "grep -C 3 foo f", "grep -3 foo f",
        "rg -n foo", "rg -n foo src", "rg --files", "rg -g '*.py' -t py foo", "rg -uu foo",
        "find . -name '*.py'", "find . -type f -name '*.py' -not -path './.git/*' -print",
        "find src -maxdepth 2 -newer f", "find . -mtime -7 -size +1k", "find . '(' -name a -o -name b ')' -print0",
        "find -L . -name x", "find . -newermt 2024-01-01", "sed -n 1,5p f", "sed -n 10p a b", "sed -n '1,20p' f",
        "sort -u f", "sort -k2,2n -t, f", "sort -S 1K f", "sort -rn f | uniq -c | head", "uniq -c f", "uniq f",
        "uniq -", "cut -d: -f1 f", "cut -c1-10 f", "tr a-z A-Z", "tr -d '\\r'", "paste -sd, f", "fold -w 80 f",
        "fmt -w 72 f", "column -t f", "diff -u a b", "diff -ru a b", "cmp a b", "comm -12 a b",
    ],
    "git": [
        "git status", "git status -sb", "git status --porcelain=v1", "git status -uno", "git log --oneline -5",
        "git log --oneline -n 5", "git log -p -1 -- src", "git log --format=%h%x09%s --since='2 weeks ago'",
        "git log --author 'A U Thor' --grep fix", "git diff", "git diff HEAD~1 -- f", "git diff --stat",
        "git diff --cached -U1", "git show HEAD", "git show --stat HEAD~2", "git show HEAD:README.md",
        "git blame -L 1,5 f", "git grep -n foo", "git grep -e foo -- '*.py'", "git grep -3 foo", "git ls-files",
        "git rev-parse --show-toplevel", "git rev-parse --abbrev-ref HEAD", "git describe --tags --always",
    ],
    "data and the system": [
        "echo hi", "echo *", "echo -n 'a|b'", "printenv HOME", "expr 1 + 2", "test -f x", "[ -f x ]",
        "[ 3 -gt -1 ]", "[ a = b ]", "true", "false", "whoami", "id -u", "uname -a", "pwd", "date",
        "date -u +%Y-%m-%d", "seq 1 10",
    ],
    "lines of them": [
        "ls -a | wc -l", "cat a.txt | grep x | wc -l && git log --oneline -5", "pwd; echo hi", "head -n 5 a || true",
        "git status && git diff --stat", "find . -name '*.py' | sort | uniq -c | sort -rn | head -n 5",
    ],
}


def cases(table: dict[str, list[str]]) -> list[object]:
    return [pytest.param(cmd, id=f"{group}: {cmd!r}") for group, cmds in table.items() for cmd in cmds]


@pytest.mark.parametrize("cmd", THE_ISSUE)
def test_the_issues_commands_are_not_known_read_only(cmd: str) -> None:
    assert not is_known_safe(cmd)
    plan = plan_command(ta.ApprovalPolicy.UNTRUSTED, ta.Sandbox(), cmd, escalate=False, justification=None)
    assert plan.action == "ask" and "not a known read-only command" in plan.reason


@pytest.mark.parametrize("cmd", cases(HOSTILE))
def test_commands_that_run_or_write_are_not_known_read_only(cmd: str) -> None:
    assert not is_known_safe(cmd)


@pytest.mark.parametrize("cmd", cases(READ_ONLY))
def test_ordinary_reads_are_known_read_only(cmd: str) -> None:
    assert is_known_safe(cmd)
    plan = plan_command(ta.ApprovalPolicy.UNTRUSTED, ta.Sandbox(), cmd, escalate=False, justification=None)
    assert plan.action == "run"
