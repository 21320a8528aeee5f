"""When to read a job's status next (SPEC §4).

Order of authority: the provider's `Retry-After`, then its own
`poll_after_seconds` hint, then the description's fixed
`default_poll_after_seconds` if it has one, else our capped exponential
backoff with "equal" jitter: a uniform draw between half the ceiling and the
ceiling spreads thousands of operations created together instead of letting
them poll in lock-step, without the extra reads of full jitter (a draw from
0, whose waits average half the ceiling: twice the reads of a fixed
schedule); the floor keeps a small draw from turning into hammering. After
the first WIDE_DRAWS_AT_CAP draws at the cap, the draw narrows to the cap's
top tenth: by then the wide draws have spread operations created together
over most of a period (with the defaults a standard deviation of about 13 s:
the ramp's draws add 5 s, the two at the cap 12 s), which the narrow draws
keep and widen slowly, and a wide draw for as long as the job runs would
read a third more often than a fixed schedule. The reconciler refines this with a
forecast of the job's end when the provider reports progress
(reconciler/forecast.py).
"""

from __future__ import annotations

import math
import random
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import TypeGuard

from shared.providers.description import Limits
from shared.providers.messages import HttpResponse

# A Retry-After or poll hint beyond a day is treated as a day: the deadlines,
# not a provider's typo or a far-future HTTP-date, decide when we give up.
MAX_HONOURED_DELAY = 86400.0
# Draws fall in the top half of the ceiling; at the cap, after WIDE_DRAWS_AT_CAP
# of those, in its top tenth.
CAP_JITTER = 0.1
WIDE_DRAWS_AT_CAP = 2


def parse_retry_after(value: str | None, now: datetime) -> float | None:
    """Seconds to wait per a Retry-After value (delay-seconds or HTTP-date), None if unusable."""
    if value is None:
        return None
    text = value.strip()
    if not text:
        return None
    try:
        seconds = float(text)
    except ValueError:
        return _seconds_until_http_date(text, now)
    if not math.isfinite(seconds) or seconds < 0:
        return None
    return min(seconds, MAX_HONOURED_DELAY)


def _seconds_until_http_date(text: str, now: datetime) -> float | None:
    try:
        when = parsedate_to_datetime(text)
    except (TypeError, ValueError, IndexError, OverflowError):  # a zone or day out of range
        return None
    if when is None:
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    reference = now if now.tzinfo is not None else now.replace(tzinfo=UTC)
    return min(max((when - reference).total_seconds(), 0.0), MAX_HONOURED_DELAY)


def backoff_ceiling(limits: Limits, attempt: int) -> float:
    """The upper bound of the jitter draw for `attempt` (0-based): base·factorⁿ, capped."""
    try:
        raw = limits.backoff_base * limits.backoff_factor ** max(attempt, 0)
    except OverflowError:
        return limits.backoff_cap
    return min(limits.backoff_cap, raw)


def is_poll_hint(poll_after: float | None) -> TypeGuard[float]:
    """Whether a provider's poll_after_seconds sets the schedule (0 included: "now")."""
    return poll_after is not None and poll_after >= 0


def backoff_floor(limits: Limits) -> float:
    """Never poll sooner than half the base delay, whatever the jitter draws."""
    return limits.backoff_base / 2


def next_poll_delay(
    limits: Limits,
    attempt: int,
    retry_after: float | None,
    poll_after: float | None,
    rng: random.Random,
    webhooks_configured: bool,
) -> float:
    """Seconds until the next status read of one job.

    `attempt` counts the reads already made without a hint (0 for the first).
    With webhooks configured the webhook is the fast path and polling only a
    backstop, so the delay is at least `webhook_backstop_poll_seconds`.
    """
    floor = backoff_floor(limits)
    if retry_after is not None:
        delay = max(min(retry_after, MAX_HONOURED_DELAY), floor)
    elif is_poll_hint(poll_after):
        delay = max(min(poll_after, MAX_HONOURED_DELAY), floor)
    elif limits.default_poll_after_seconds is not None:
        delay = limits.default_poll_after_seconds
    else:
        delay = _jittered(limits, attempt, rng)
    if webhooks_configured:
        delay = max(delay, limits.webhook_backstop_poll_seconds)
    return delay


def retry_delay(
    limits: Limits, attempt: int, retry_after: float | None, rng: random.Random
) -> float:
    """Seconds until a failed or uncertain call is made again (a create, cancel,
    lookup or result fetch; not a status read).

    The jittered backoff, or the provider's Retry-After. Neither the webhook
    backstop nor a fixed poll interval applies: a delivery announces a job's
    state, never that a call can be retried, so a retry with webhooks waited
    `webhook_backstop_poll_seconds` (300 s) for nothing, an operation sitting
    in `create_unknown` meanwhile.
    """
    if retry_after is not None:
        return max(min(retry_after, MAX_HONOURED_DELAY), backoff_floor(limits))
    return _jittered(limits, attempt, rng)


def _jittered(limits: Limits, attempt: int, rng: random.Random) -> float:
    """The backoff's draw for `attempt`: full jitter below the cap, narrower at it."""
    ceiling = backoff_ceiling(limits, attempt)
    # the ceiling never shrinks (backoff_factor >= 1): WIDE_DRAWS_AT_CAP draws
    # ago it was already the cap
    earlier = attempt - WIDE_DRAWS_AT_CAP
    narrow = earlier >= 0 and backoff_ceiling(limits, earlier) >= limits.backoff_cap
    spread = CAP_JITTER if narrow else 0.5
    return max(rng.uniform(ceiling * (1 - spread), ceiling), backoff_floor(limits))


# Past this a rate limit's reset is a UTC epoch (GitHub's x-ratelimit-reset:
# 1767225600), below it a delay in seconds (the IETF draft's RateLimit-Reset).
_EPOCH_FLOOR = 1e9


def quota_reset_seconds(resp: HttpResponse, now: datetime) -> float | None:
    """Seconds until a spent quota comes back, per the rate-limit reset header an
    answer carries (`x-ratelimit-reset`, `ratelimit-reset`, any spelling), or None.

    GitHub answers a read past its primary rate limit 403 with
    `x-ratelimit-remaining: 0` and `x-ratelimit-reset`, and no Retry-After: the
    read was retried at the backoff, every try refused until the hour's reset,
    each one spending the next hour's quota early."""
    for name, value in resp.headers.items():
        squeezed = name.lower().replace("-", "").replace("_", "")
        if not (squeezed.endswith("reset") and "ratelimit" in squeezed):
            continue
        try:
            number = float(value.strip())
        except ValueError:
            continue
        if not math.isfinite(number) or number < 0:
            continue
        seconds = number - now.timestamp() if number >= _EPOCH_FLOOR else number
        return min(max(seconds, 0.0), MAX_HONOURED_DELAY)
    return None
