"""Input that waits for a turn: the agent mailbox and the input-activity signal.

- ``Mail`` is one ``agent_message`` item from another agent (``post_mail``), either
  queue-only or triggering (``trigger_turn``: it starts a turn when the agent is idle).
  The ``Mailbox`` holds mail until a request boundary takes it (bounded: posting to a
  full mailbox fails with ``MailboxFull`` rather than growing without limit). Its
  ``flag`` says whether mail waits, kept current on every post and take: the live
  response's accumulator reads it to cut at a reasoning item or commentary message.
  ``posted`` numbers the posts, so a turn starting can tell the mail posted before it
  was accepted from the mail posted after (``take_split``: the order of arrival).
- ``InputActivity`` counts every new piece of input (a steer, an injected item, mail)
  and lets a tool wait for the next one: ``clock.sleep`` and ``wait_agent`` return
  early on it (SPEC sec. 10; codex.md 3.7).
"""

from __future__ import annotations

import collections
from typing import Any, Literal

import trio

from ..._errors import AgentError
from ..._record import Record
from ..._wire.stream import MailFlag

__all__ = ["MAILBOX_CAPACITY", "InputActivity", "InputKind", "Mail", "Mailbox", "MailboxFull", "agent_message"]

MAILBOX_CAPACITY = 1024
InputKind = Literal["steer", "mail"]


class MailboxFull(AgentError):
    """Raised by ``Agent.post_mail`` when the recipient already holds
    ``MAILBOX_CAPACITY`` undelivered messages."""


def agent_message(author: str, recipient: str, text: str) -> dict[str, Any]:
    """The Responses item of one inter-agent message (codex.md 3.2)."""
    return {
        "type": "agent_message",
        "author": author,
        "recipient": recipient,
        "content": [{"type": "input_text", "text": text}],
    }


class Mail(Record):
    __slots__ = ("item", "trigger_turn")

    def __init__(self, item: dict[str, Any], trigger_turn: bool = False) -> None:
        self.item = item
        self.trigger_turn = trigger_turn


class Mailbox:
    def __init__(self, capacity: int = MAILBOX_CAPACITY) -> None:
        self._mail: collections.deque[Mail] = collections.deque()
        self._numbers: collections.deque[int] = collections.deque()  # each waiting mail's post number
        self._capacity = capacity
        self.posted = 0  # how many posts so far (the number of the latest)
        self.flag = MailFlag()  # mail waits: written here alone

    def __len__(self) -> int:
        return len(self._mail)

    @property
    def has_trigger(self) -> bool:
        for mail in self._mail:  # (no generator expression: read at every turn's end)
            if mail.trigger_turn:
                return True
        return False

    def post(self, mail: Mail) -> None:
        if len(self._mail) >= self._capacity:
            raise MailboxFull(
                f"the agent's mailbox already holds {self._capacity} undelivered messages; "
                "wait for it to take them (a turn) before posting more"
            )
        self.posted += 1
        self._mail.append(mail)
        self._numbers.append(self.posted)
        self.flag.waiting = True

    def take_queue_only(self) -> list[Mail]:
        """Take the queue-only mail, leaving triggering mail in place."""
        kept = [(number, mail) for number, mail in zip(self._numbers, self._mail, strict=True) if mail.trigger_turn]
        taken = [mail for mail in self._mail if not mail.trigger_turn]
        self._numbers = collections.deque(number for number, _ in kept)
        self._mail = collections.deque(mail for _, mail in kept)
        self.flag.waiting = bool(self._mail)
        return taken

    def take_all(self) -> list[Mail]:
        taken = list(self._mail)
        self._mail.clear()
        self._numbers.clear()
        self.flag.waiting = False
        return taken

    def take_split(self, mark: int) -> tuple[list[Mail], list[Mail]]:
        """Take all mail, split into what was posted up to post number ``mark`` (the
        ``posted`` count read when a turn was accepted) and what came after it."""
        before = sum(1 for number in self._numbers if number <= mark)  # numbers increase
        taken = self.take_all()
        return taken[:before], taken[before:]


class InputActivity:
    """A counter of arrived input with a way to wait for the next arrival."""

    def __init__(self) -> None:
        self.count = 0
        self._last_steer = 0  # the count at the latest steer (or injected item)
        self._changed = trio.Event()

    def notify(self, kind: InputKind) -> None:
        self.count += 1
        if kind == "steer":
            self._last_steer = self.count
        self._changed.set()
        self._changed = trio.Event()

    async def wait_after(self, seen: int) -> InputKind:
        """What arrived after ``seen`` (now, if something already has): ``"steer"`` when
        any of it was a steer or injected item, else ``"mail"``."""
        while self.count == seen:
            await self._changed.wait()
        return "steer" if self._last_steer > seen else "mail"
