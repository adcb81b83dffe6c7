"""The dashboard (Textual).

Textual batches screen updates at `TEXTUAL_FPS` (60 by default): a keystroke's echo waits up to a whole frame
for the next tick. The embedded terminal coalesces output floods itself (at most 60 frames a second), so a higher
update rate costs nothing while idle and takes most of that wait off every echo. Set before Textual is imported;
a user's own `TEXTUAL_FPS` wins.
"""

import os

os.environ.setdefault("TEXTUAL_FPS", "240")
