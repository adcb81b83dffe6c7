"""FramePacer: when an embedded terminal repaints after output arrived.

Two kinds of output reach the terminal. Output that answers a key (the echo of a typed character, a redrawn
prompt) is what a typist waits for: it is drawn at once. Everything else (an agent streaming, a flood) is drawn
at most once a frame, so a flood costs a bounded number of repaints a second. Textual's own update timer still
paces the compositor; this only decides whether the terminal asks for a repaint now or at the end of the frame.
"""

from __future__ import annotations

import time
from collections.abc import Callable

FRAME_INTERVAL = 1 / 60
"""The shortest time between two repaints of streaming output."""

ECHO_WINDOW = 0.1
"""How long after a key its answer is still drawn at once (a shell echoes in well under a millisecond; a busy agent
redrawing its prompt takes longer)."""


class FramePacer:
    """Decides how long a repaint waits. Pure timing: no widget, no event loop, so tests drive it with a clock."""

    def __init__(self, interval: float = FRAME_INTERVAL, echo_window: float = ECHO_WINDOW,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.interval = interval
        self.echo_window = echo_window
        self._clock = clock
        self._last_key = float("-inf")
        self._last_flush = float("-inf")

    def key_sent(self) -> None:
        """Input went to the program: what comes back soon is its answer."""
        self._last_key = self._clock()

    def flushed(self) -> None:
        """The terminal just asked for a repaint."""
        self._last_flush = self._clock()

    def delay(self) -> float:
        """Seconds until the next repaint may be asked for (0: now)."""
        now = self._clock()
        if now - self._last_key <= self.echo_window:
            return 0.0
        return max(0.0, self._last_flush + self.interval - now)
