"""One visitor's share of the page's queue. Gradio's queue holds `QUEUE_SIZE` (64) events waiting for everyone
together, and anyone who can open the page can fill it from a script (gradio_client, the page's own endpoints):
then every other person gets "queue full". `QueueShare` lets one client (its address as the API judges it:
`fastvlm.api.security.counted_client`, so behind a trusted proxy the forwarded one) have at most `most` events
waiting at once; its next is refused as Gradio refuses a full queue (HTTP 503), while others still get in.
This machine's own clients (loopback) are not counted.

It wraps the `push` of the Blocks' `Queue` (Gradio 6's `Blocks._queue`, where `/queue/join` puts each event) and
reads the events waiting in it (`event_queue_per_concurrency_id[...].queue`, each `Event.request` the request that
joined): tests/unit/ui/test_ui_queue_share.py checks both against the installed Gradio."""

from __future__ import annotations

import logging

from fastvlm.api.security import counted_client

log = logging.getLogger(__name__)

REFUSED = ("You already have {n} requests waiting in this server's queue: wait for them to be answered, then ask "
           "again (others get a turn).")


class QueueShare:
    """At most `most` waiting events per client in a Gradio queue (0: no limit); `api`: the `ApiSettings` whose
    trusted proxies and forwarded header say who a client is."""

    def __init__(self, most: int, api):
        if most < 0:
            raise ValueError(f"most={most}: the waiting events one client may have must be >= 0 (0: no limit)")
        self.most, self.api = most, api

    def waiting(self, queue, client: str) -> int:
        """Events of `client` waiting in `queue` (not those already running)."""
        return sum(1 for events in list(queue.event_queue_per_concurrency_id.values()) for event in list(events.queue)
                   if counted_client(event.request, self.api) == client)

    def install(self, demo) -> None:
        """From now on `demo`'s queue refuses a client's event past its share (with no limit, nothing changes)."""
        if not self.most:
            return
        queue = demo._queue
        push = queue.push

        async def push_within_share(body, request, username):
            client = counted_client(request, self.api)
            if client is not None and (n := self.waiting(queue, client)) >= self.most:
                log.warning("refused client=%s queue/join status=503 reason=queue_share (%d waiting)", client, n)
                return False, REFUSED.format(n=n), "queue_full"
            return await push(body=body, request=request, username=username)

        queue.push = push_within_share
