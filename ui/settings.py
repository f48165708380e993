"""What the app lets a person choose, and its limits. `app.py` maps flags onto these; tests shrink them."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class AppSettings:
    title: str = "FastVLM on CPU"
    max_new_tokens: int = 256  # default of the Image tab's slider
    max_new_tokens_limit: int = 1024  # the slider's top
    snapshot_max_new_tokens: int = 128
    live_max_new_tokens: int = 48  # live answers stay short so the next frame is not skipped
    live_interval_s: float = 4.0  # default seconds between live frames (slider 1-10)
    live_feed_size: int = 20  # answers kept in the live feed, newest first
    frame_every_s: float = 0.5  # how often the live webcam sends its latest frame
    camera_resolution: int | None = None  # snapshot + live image size; None: the engine's configured one
    ui_update_s: float = 0.05  # coalesce text deltas into at most one page update per this many seconds

    def __post_init__(self) -> None:
        if not 1 <= self.live_interval_s <= 10:
            raise ValueError("live_interval_s must be between 1 and 10 seconds")
        if not 1 <= self.max_new_tokens <= self.max_new_tokens_limit:
            raise ValueError("max_new_tokens must be between 1 and max_new_tokens_limit")
