"""Small helpers for driving the app's page: waiting, reading the chat and toasts, screenshots."""

from __future__ import annotations

import re
import time
from pathlib import Path

SHOTS = Path(__file__).resolve().parents[2] / "artifacts" / "screenshots"


def screenshot(page, name: str) -> Path:
    """Saved under artifacts/screenshots/ (gitignored) for a person to look at."""
    SHOTS.mkdir(parents=True, exist_ok=True)
    path = SHOTS / f"{name}.png"
    page.screenshot(path=str(path))
    return path


def wait_until(predicate, timeout: float = 15.0, every: float = 0.05, what: str = "condition"):
    """Poll `predicate` until it returns something truthy; that value is returned."""
    end = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > end:
            raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(every)


def wait_for_text(page, read, accept, timeout: float, what: str, every: float = 0.05) -> str:
    """Poll `read()` (a text on the page) until `accept(text)`; that text is returned. On a timeout the error
    names every text seen meanwhile and the toasts on screen."""
    seen = []

    def accepted() -> bool:
        seen.append(read())
        return accept(seen[-1])

    try:
        wait_until(accepted, timeout, every, what)
    except AssertionError as e:
        raise AssertionError(f"{e}; seen {sorted(set(seen))}; toasts: {toasts(page)}") from e
    return seen[-1]


def wait_settled(engine, timeout: float = 10.0) -> None:
    """Until `engine` is idle, and still idle a moment later: not caught between two prepares in a row."""
    for _ in range(2):
        wait_until(lambda: not engine.busy, timeout, what="the engine to be idle")
        time.sleep(0.2)


def toasts(page) -> str:
    return " | ".join(page.locator(".toast-body").all_inner_texts())


def wait_toast(page, text: str, timeout: float = 10.0) -> str:
    """Wait until a toast saying `text` is on screen; all toasts' text."""
    page.locator(".toast-body", has_text=text).first.wait_for(state="visible", timeout=timeout * 1000)
    return toasts(page)


def close_toasts(page) -> None:
    for button in page.locator(".toast-close").all():
        if button.is_visible():
            button.click()


# -- Image tab ----------------------------------------------------------------------------------------------
def upload(page, file) -> None:
    """Put `file` (a path, or Playwright's {name, mimeType, buffer}) in the Image tab and wait until the page
    shows it, not the image it showed before (which is there from the second upload on)."""
    shown = page.locator("#image-input img").first

    def src() -> str | None:
        from playwright.sync_api import Error

        try:
            return shown.get_attribute("src", timeout=1000) if shown.count() else None
        except Error:  # replaced while it was read
            return None

    before = src()
    name = file["name"] if isinstance(file, dict) else Path(file).name
    page.locator("#image-input input[type=file]").set_input_files(file if isinstance(file, dict) else str(file))
    wait_until(lambda: src() not in (None, before), 30, what=f"the Image tab to show {name}")


def ask(page, question: str, enter: bool = False) -> None:
    box = page.locator("#image-question textarea")
    box.fill(question)
    if enter:
        box.press("Enter")
    else:
        page.locator("#image-submit").click()


def chat(page, role: str) -> list[str]:
    """Texts of the chat's messages from `role` ('user' or 'bot'), oldest first."""
    return page.locator(f"#image-chat [data-testid={role}]").all_inner_texts()


def metrics(page) -> str:
    return page.locator("#image-metrics").inner_text()


_TIME = r"(?:\d+ ms|[\d.]+ s)"  # how `ui.widgets.ms` writes a time: "640 ms", or "12.3 s" from 10 s on
FINAL_METRICS = re.compile(rf"TTFT {_TIME} · encode (cached|{_TIME}) · prefill {_TIME}( \(\d+ reused\))? · "
                           r"[\d.]+ tok/s · (\d+) tokens")


def wait_answer(page, n_answers: int, timeout: float = 20.0) -> re.Match:
    """Wait until the chat holds `n_answers` answers and the metrics line is final; the line's match."""
    def done():
        match = FINAL_METRICS.search(metrics(page))
        return match if match and len(chat(page, "bot")) >= n_answers else None

    try:
        return wait_until(done, timeout, what=f"answer {n_answers} and its metrics line")
    except AssertionError as e:  # say what the page showed instead
        raise AssertionError(f"{e}; the page shows {len(chat(page, 'user'))} questions, "
                             f"{len(chat(page, 'bot'))} answers, metrics {metrics(page)!r} and toasts "
                             f"{toasts(page)!r}") from None
