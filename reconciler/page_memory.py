"""The pages of a paged result read so far, kept between a collection's attempts.

A paged result is stored whole or not at all, and a throttle on page k ends
the attempt (a step never sleeps: it hands its lease back with a delay). Read
from page 1 again on every attempt, a large result at a provider that throttles
its reads (Textract's Get quota is a few calls a second, Firecrawl answers
429s) had every attempt meet a throttle somewhere: at a 5 % throttle rate a
50-page result arrives whole on one attempt in 13, and every attempt spends
the quota again on the pages it had. The next attempt goes on from the page
that was refused instead.

Only pages that answered 2xx are kept, with the request that answered each:
they are the finished job's own answers, so a later page adds to them rather
than replacing them, as long as the result is still the one they came from: the
attempt that goes on first fetches page 1 again, and goes on only if it is the
same bytes (`PageProgress.same_result`); otherwise it begins again from the
page 1 it just read (the provider rewrote the result meanwhile).

Memory only, per process, bounded by bytes and by age: a
restart, another reconciler claiming the next attempt, or an entry evicted
all fall back to page 1, which is what every attempt did before. Nothing here
is the record (every call is in the call log); losing it costs calls, never
correctness.
"""

from __future__ import annotations

import json
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

from shared.providers import HttpRequest, HttpResponse
from shared.providers.paths import ValuePath, extract


def _items_of(items: ValuePath, page: HttpResponse) -> Any:
    """The page's items (a JSON page), or None (no JSON, or no items there): such a
    page, its bytes changed, is taken as changed."""
    try:
        return extract(items, json.loads(page.body))
    except (ValueError, RecursionError):
        return None


# What all the kept pages may hold together; an entry past it is not kept.
MAX_BYTES = 64 * 1024 * 1024
# An entry unused this long is stale: a collection retries within minutes,
# and one that gave up (a human's now) left its entry behind.
MAX_AGE_SECONDS = 3600.0

Sent = tuple[str, str]  # what tells one page's request from another's


@dataclass
class PageProgress:
    """Where the reading of one paged result stands."""

    first: HttpRequest  # the result's request: every page's is built from it
    parts: list[HttpResponse]  # every page read, in order, each 2xx but the last maybe
    req: HttpRequest  # the request the last part answered
    token: str | None  # what the last part names as the next page (None: the end)
    seen: set[Sent] = field(default_factory=set)  # requests already answered
    stalls: int = 0  # attempts in a row that went on from here and read no page
    changes: int = 0  # attempts that found the first page changed and began again

    def same_result(self, first_page: HttpResponse, items: ValuePath | None = None) -> bool:
        """Is `first_page`, fetched again by the request that answered `parts[0]`,
        the same version of the result? A provider that rewrote the result
        meanwhile (a job re-run, a dataset regenerated) changes its first page,
        and the kept pages would join an old version to a new one.

        With `items` (the result's items, JSON pages), the two pages' items are
        compared: what else a page holds may differ from one fetch to the next
        though the result did not (a fresh cursor or signed next-page link, a
        request id, the time of the answer), and such a page compared byte for
        byte would send every resume back to page 1 and, throttled on each, end
        with the result said to keep changing. Else the bytes (the kept page's
        own are compared, so no digest is kept beside them)."""
        kept = self.parts[0]
        if first_page.status_code != kept.status_code:
            return False
        if first_page.body == kept.body:
            return True
        if items is None:
            return False
        now, then = _items_of(items, first_page), _items_of(items, kept)
        return now is not None and now == then

    @property
    def size(self) -> int:
        return sum(len(part.body) for part in self.parts)


@dataclass
class _Kept:
    progress: PageProgress
    at: float


class PageMemory:
    """Per-process store of `PageProgress`, by operation and first request."""

    def __init__(self, max_bytes: int = MAX_BYTES, max_age: float = MAX_AGE_SECONDS) -> None:
        self._max_bytes = max_bytes
        self._max_age = max_age
        self._kept: OrderedDict[tuple[str, Sent], _Kept] = OrderedDict()
        self._bytes = 0

    def __len__(self) -> int:
        return len(self._kept)

    def keep(self, operation_id: str, first: Sent, progress: PageProgress, now: float) -> None:
        """Keep `progress` for the next attempt (replacing what was kept)."""
        self.take(operation_id, first, now)
        size = progress.size
        if size > self._max_bytes:
            return
        self._expire(now)
        while self._kept and self._bytes + size > self._max_bytes:
            _, oldest = self._kept.popitem(last=False)
            self._bytes -= oldest.progress.size
        self._kept[(operation_id, first)] = _Kept(progress, now)
        self._bytes += size

    def take(self, operation_id: str, first: Sent, now: float) -> PageProgress | None:
        """The progress kept for this result, removed (the caller keeps it again if it
        stops short once more); None when nothing fresh is kept."""
        kept = self._kept.pop((operation_id, first), None)
        if kept is None:
            return None
        self._bytes -= kept.progress.size
        if now - kept.at > self._max_age:
            return None
        return kept.progress

    def _expire(self, now: float) -> None:
        while self._kept:
            key, oldest = next(iter(self._kept.items()))
            if now - oldest.at <= self._max_age:
                return
            del self._kept[key]
            self._bytes -= oldest.progress.size
