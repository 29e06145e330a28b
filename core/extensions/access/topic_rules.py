"""Which topics an extension may not publish, or only with a permission.

``KERNEL_ONLY``: prefixes only the kernel publishes, with the refusal's words.
``GUARDED_TOPICS``: system topics whose publication does what a guarded call
of the context does, so ``emit`` needs the same permission (another door to
the same act).
"""

from __future__ import annotations

from core.events.topics import PostProcessTopics, RecordTopics, SystemTopics

__all__ = ["GUARDED_TOPICS", "KERNEL_ONLY"]

# topics only the kernel publishes: the frames of hook decisions (replay trusts them)
# and post-processor results (webhooks act on them)
KERNEL_ONLY = {
    RecordTopics.HOOK_PREFIX: "hook.* frames are the kernel's own",
    PostProcessTopics.PREFIX: "postprocess.* results are the kernel's own",
    RecordTopics.REPLAY_PREFIX: "replay.* records are the kernel's own",
    # resuming a turn paused for the user's approval (ADR 0021)
    SystemTopics.TURN_RESUME: "the resumption of paused turns is the kernel's own",
    # reloading extensions is the user's, from the command line (ADR 0032)
    SystemTopics.KERNEL_PREFIX: "kernel control is the user's (main.py extensions reload)",
    SystemTopics.TURN_CANCELLED: "the record of a cancelled turn is the kernel's own",
}

# system topics whose publication does what a guarded call does
GUARDED_TOPICS = {
    SystemTopics.USER_MESSAGE: "user_messages",
    SystemTopics.UI_ANSWER: "user_messages",
    SystemTopics.TURN_CANCEL: "user_messages",
    SystemTopics.USER_NOTIFY: "notify",
    SystemTopics.AGENT_TASK: "agent",
    SystemTopics.AGENT_BACKGROUND: "agent",
}
