"""Token-bucket pacing: how long until the next frame of a given size may leave."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class TokenBucket:
    """Tokens are bytes, refilled at ``rate_bps``/8 per second up to ``burst_bytes``.

    A rate of 0 or less means unlimited. Rates can change at any time (rate control does)."""

    rate_bps: float
    burst_bytes: float = 16 * 1024
    tokens: float = 0.0
    stamp: float | None = None

    def _refill(self, now: float) -> None:
        if self.stamp is None:
            self.stamp = now
            self.tokens = self.burst_bytes
            return
        if now > self.stamp:
            self.tokens = min(self.burst_bytes, self.tokens + (now - self.stamp) * self.rate_bps / 8)
            self.stamp = now

    def wait_time(self, now: float, nbytes: int) -> float:
        """Seconds until ``nbytes`` may be sent (0 when now)."""
        if self.rate_bps <= 0:
            return 0.0
        self._refill(now)
        missing = nbytes - self.tokens
        return 0.0 if missing <= 0 else missing * 8 / self.rate_bps

    def consume(self, now: float, nbytes: int) -> None:
        if self.rate_bps <= 0:
            return
        self._refill(now)
        self.tokens -= nbytes

    def restart(self, now: float, nbytes: int) -> None:
        """Start a busy period with exactly ``nbytes`` of tokens (one frame): whatever the
        bucket saved while idle is dropped, so from here no more than one frame plus the rate
        times the time since can leave (a message never runs ahead of its pace)."""
        self.stamp = now
        self.tokens = min(self.burst_bytes, float(nbytes))

    def set_rate(self, now: float, rate_bps: float) -> None:
        self._refill(now)
        self.rate_bps = rate_bps

