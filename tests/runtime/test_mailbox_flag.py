"""The mailbox's flag says whether mail waits, kept current on every post and take (the
live response's accumulator reads it at a cut point: ``trio_agent._wire.stream``)."""

from __future__ import annotations

from trio_agent._runtime._turns._input import Mail, Mailbox, agent_message


def _mail(text: str, *, trigger: bool = False) -> Mail:
    return Mail(agent_message("/root/a", "/root", text), trigger)


def test_the_flag_follows_posts_and_takes() -> None:
    mailbox = Mailbox()
    assert not mailbox.flag.waiting
    mailbox.post(_mail("queued"))
    mailbox.post(_mail("triggering", trigger=True))
    assert mailbox.flag.waiting
    assert [m.item["content"][0]["text"] for m in mailbox.take_queue_only()] == ["queued"]
    assert mailbox.flag.waiting  # the triggering mail still waits
    mailbox.take_all()
    assert not mailbox.flag.waiting
    mailbox.post(_mail("again"))
    assert mailbox.take_queue_only() and not mailbox.flag.waiting
