"""The thread manager: durable threads (agents with rollouts) with subscribers and idle unload.

Theory of operation (SPEC sec. 11; codex.md 7.2-7.4): ``open_thread_manager(home)`` owns
one nursery. Each loaded thread is a task in it that holds ``open_agent`` for that
thread (session id = thread id, rollout under ``home`` unless ephemeral); the agent's
events reach the manager's event stream, tagged with the thread id, as the agent emits
them (a listener on its event sink, in the agent's own task: no task or queue between). A thread
is *active* while a turn runs; its status is ``ACTIVE``, else ``SYSTEM_ERROR`` after a
failed turn (until the next turn starts), else ``IDLE``; ``NOT_LOADED`` when no task
holds it.

Idle unload: a loaded thread with no subscriber and no running turn unloads after its
delay (the manager's ``unload_delay``, or the thread's own). The countdown is a Trio
cancel scope with a deadline: it starts when the thread becomes inactive or loses its
last subscriber, whichever is later, and any activity, subscribe or resume restarts
it; a subscribed thread never unloads, even with delay 0. Unloading closes the agent
(its rollout flushed), then emits ``thread.status`` ``NOT_LOADED`` and
``thread.closed``. ``resume`` is warm for a loaded thread (it subscribes, which
cancels a pending unload) and cold otherwise (``RolloutConfig.load_session``);
ephemeral threads keep no rollout and cannot be resumed once unloaded.

Closing the manager cancels every thread: running turns end with their terminal
events, rollouts are flushed, and nothing outlives the block.
"""

from ._manager import ThreadManager, open_thread_manager
from ._values import ThreadError, ThreadEvent, ThreadEvents, ThreadInfo, ThreadStatus, UnsubscribeStatus

__all__ = [
    "ThreadError",
    "ThreadEvent",
    "ThreadEvents",
    "ThreadInfo",
    "ThreadManager",
    "ThreadStatus",
    "UnsubscribeStatus",
    "open_thread_manager",
]
