"""Each journey walked through the real page (see fastvlm.bench.browser). Every function takes a page already
on the app and returns per-run rows; times are seconds, measured on the page's clock unless named `_server`."""

from __future__ import annotations

import logging
import re
import time

from ..journeys import QUESTION
from . import page as pg

log = logging.getLogger(__name__)
CHAT_ANSWER = "#image-chat [data-testid=bot]"
FINAL = re.compile(r"· \d+ tokens")
SNAPSHOT_DONE = re.compile(pg.IMAGE_TTFT.pattern + r" · total \d")  # a finished answer's snapshot readout
# the readout itself: its box also holds Gradio's progress text ("processing | 0.0s") while an answer is pending
SNAPSHOT_READOUT = "#snapshot-ttft .readout-ttft"


def _image_answer(page) -> dict:
    """After Submit was clicked: first answer text (page clock) and the metrics line once it is final."""
    first = pg.first_text_at(page, "answer")
    page.locator("#image-metrics", has_text=FINAL).wait_for()
    line = page.locator("#image-metrics").inner_text()
    shown = pg.IMAGE_TTFT.search(line)
    speed = pg.TOKENS_PER_S.search(line)
    return {"ttft_s": first - pg.clicked_at(page, "image-submit"), "page_ttft_s": pg.seconds(shown.group(1)),
            "page_tokens_per_s": float(speed.group(1)), "tokens": int(speed.group(2)),
            "encode_cached": "encode cached" in line, "metrics": line}


def _upload(page, image) -> float:
    """Clear the Image tab (as a person removing the last picture) and choose `image`; wall time of the choice."""
    remove = page.locator("#image-input button[aria-label='Remove Image']")
    if remove.count() and remove.first.is_visible():
        remove.first.click()
    page.locator("#image-input input[type=file]").set_input_files(str(image))
    t = time.time()
    page.locator("#image-question textarea").fill(QUESTION)  # typed while the upload is prepared
    return t


def upload_ask(page, image, delay_s: float) -> dict:
    """Upload, `delay_s` of typing, Submit -> the first answer text on the page (the Image tab)."""
    t_up = _upload(page, image)
    page.wait_for_function("() => !document.querySelector('#image-chat [data-testid=user]')")  # chat cleared
    time.sleep(max(0.0, t_up + delay_s - time.time()))
    pg.arm_first_text(page, "answer", CHAT_ANSWER)
    late = time.time() - t_up - delay_s
    page.locator("#image-submit").click()
    row = {**_image_answer(page), "submitted_late_s": max(late, 0.0)}
    log.info("upload_ask after %.1f s: first text %.3f s", delay_s, row["ttft_s"])
    return row


def snapshot(page, engine, delay_s: float) -> dict:
    """Capture a webcam frame, `delay_s`, Analyse -> the first answer text (the Camera snapshot tab), and how long
    after the engine was asked it showed (`first_text_after_ask_s`: a first text seen before that was the last
    answer's)."""
    root = "#snapshot-camera"
    remove = page.locator(f"{root} button[aria-label='Remove Image']")
    if remove.count() and remove.first.is_visible():
        remove.first.click()
    if not page.locator(f"{root} button[aria-label='capture photo']").is_visible():
        pg.open_camera(page, root)
    page.wait_for_function(f"() => document.querySelector('{root} video')?.readyState >= 2")
    page.locator(f"{root} button[aria-label='capture photo']").click()
    t_cap = time.time()
    page.locator(f"{root} img").first.wait_for()
    time.sleep(max(0.0, t_cap + delay_s - time.time()))
    pg.arm_first_text(page, "answer", "#snapshot-answer textarea", busy=SNAPSHOT_READOUT)
    page.locator("#snapshot-analyse").click()
    first, clicked = pg.first_text_at(page, "answer"), pg.clicked_at(page, "snapshot-analyse")
    shown = _final_readout(page)
    asked = next((r["at"] for r in engine.requests if r["at"] >= clicked), None)
    return {"ttft_s": first - clicked, "page_ttft_s": pg.seconds(shown.group(1)),
            "first_text_after_ask_s": None if asked is None else first - asked}


def _final_readout(page, timeout_s: float = 60.0) -> re.Match:
    """The snapshot readout once it shows both the TTFT and the total ('TTFT 80 ms · total 0.2 s'), matched on the
    same text it is read from (waiting for 'total', then reading again, once read a readout without a TTFT)."""
    until = time.time() + timeout_s
    while True:
        text = page.locator(SNAPSHOT_READOUT).inner_text()
        if (shown := SNAPSHOT_DONE.search(text)) is not None:
            return shown
        if time.time() > until:
            answer = page.locator("#snapshot-answer textarea").input_value()
            raise RuntimeError(f"the snapshot readout never showed a finished answer's times: {text!r} "
                               f"(answer {answer[:80]!r})")
        time.sleep(0.02)


def stop(page, engine, image, at: str, stages: dict) -> dict:
    """Submit on the Image tab (the upload not prepared, as when the engine was busy at upload), press Stop
    half-way through the encode or the prefill -> the engine idle (observed in this process, 0.5 ms polls)."""
    delay = stages["encode_s"] * 0.5 if at == "encode" else stages["encode_s"] + stages["prefill_s"] * 0.5
    page.get_by_role("tab", name="Image", exact=True).click()
    engine.refuse_prepare = True
    try:
        _upload(page, image)
        page.wait_for_function("() => !document.querySelector('#image-chat [data-testid=user]')")
        t_submit = time.time()
        page.locator("#image-submit").click()
        while not engine.busy:
            time.sleep(0.0005)
        time.sleep(delay)
        page.locator("#image-stop").click()
        while engine.busy:
            time.sleep(0.0005)
        t_idle = time.time()
    finally:
        engine.refuse_prepare = False
    stats = next((r["stats"] for r in engine.requests if r["at"] >= t_submit and r["stats"] is not None), None)
    cancelled = stats is not None and stats.stop_reason == "cancelled"
    stopped_in = ("encode" if stats.encode_s == 0 else "prefill") if cancelled else "after"
    return {"aimed_at": at, "stopped_in": stopped_in, "to_idle_s": t_idle - pg.clicked_at(page, "image-stop")}


def live(page, engine, live_s: float) -> dict:
    """Start the Live tab (its default cadence) for `live_s`, then Stop. Per answered frame: page TTFT, first
    text and complete answer shown, behind the moment the engine took the frame up (server clock)."""
    page.get_by_role("tab", name="Live").click()
    pg.watch(page, "feed", "#live-feed", html=True)
    t0 = time.time()
    page.locator("#live-start").click()
    time.sleep(live_s)
    answered, skipped = pg.live_counts(page)
    page.locator("#live-stop").click()
    while engine.busy:
        time.sleep(0.01)
    rows, until = _live_rows(engine, pg.recorded(page)["log"], t0), time.time() + LIVE_SETTLE_S
    while len(rows) < answered and time.time() < until:  # the last answer's "done" may not be painted yet
        time.sleep(0.05)
        rows = _live_rows(engine, pg.recorded(page)["log"], t0)
    return {"answered": answered, "skipped": skipped, "runs": rows}


LIVE_SETTLE_S = 3.0  # after Stop and the engine idle, how long the page may take to show the last answer done
ITEM = re.compile(r'<li class="feed-item (\w+)"><span class="feed-meta">(\d\d:\d\d:\d\d) · TTFT (\d+ ms|[\d.]+ s|…)')


def _live_rows(engine, log_rows, t0: float) -> list[dict]:
    """Match each answered request (in order) to the feed item it produced (in order of first appearance)."""
    seen: dict[tuple[str, int], dict] = {}
    for t, _, text in log_rows:
        found = ITEM.findall(text)  # newest first: new items go on top
        for i, (state, at, ttft) in enumerate(found):
            older = sum(a == at for _, a, _ in found[i + 1:])  # items of the same second below it: stable as
            item = seen.setdefault((at, older), {"shown": t})  # new ones go on top (two answers in one second)
            if state == "done" and "done" not in item:
                item["done"], item["page_ttft_s"] = t, pg.seconds(ttft) if ttft != "…" else None
    items = sorted((i for i in seen.values() if "done" in i), key=lambda i: i["shown"])
    taken = engine.answered_since(t0)
    return [{"page_ttft_s": item["page_ttft_s"], "first_text_s": item["shown"] - req["at"],
             "lag_s": item["done"] - req["at"], "engine_ttft_s": req["stats"].ttft_s}
            for req, item in zip(taken, items)]


READOUT = re.compile(r"STT (\d+ ms|[\d.]+ s) · TTFT (\d+ ms|[\d.]+ s) · first sound (\d+ ms|[\d.]+ s) after")


def voice(page, spoken, turns: int, timeout_s: float) -> dict:
    """Start hands-free on the Voice + camera tab; the fake microphone loops `spoken` (media.SpokenQuestions).
    Until `turns` answers have started to sound (or `timeout_s`): per heard question, end of speech (the page's
    microphone stream) -> the answer's audio playing in the page, the transcript shown and the page's readout;
    `talked_over`: the questions that stopped the sound of the answer before (`voice_slot_s` shorter than it)."""
    page.get_by_role("tab", name="Voice + camera").click()
    pg.watch(page, "transcript", "#voice-transcript textarea")
    pg.watch(page, "readout", "#voice-readout")
    pg.hear_media(page, "#voice-speaker")
    page.locator("#voice-start").click()
    end = time.time() + timeout_s
    while time.time() < end and len(_voice_rows(pg.recorded(page), spoken)) < turns:
        time.sleep(0.5)
    talked_over = len(_barge_rows(page, spoken))  # before Stop, which hushes the sound too
    page.locator("#voice-stop").click()
    rec = pg.recorded(page)
    return {"runs": _voice_rows(rec, spoken)[:turns], "heard": len(_first_per_slot(rec, spoken)),
            "talked_over": talked_over,
            "mic_lead_s": (rec["speech_starts"][0] - rec["mic_opened"]) if rec["speech_starts"] else None}


def _voice_rows(rec: dict, spoken) -> list[dict]:
    """One row per question whose answer sounded before the next question began. A question's speech starts at its
    slot's first start the microphone stream carried (people pause mid-sentence: a pause of 600 ms reads as a new
    start) and ends `spoken.end_after` that; an answer that began to sound before that end was to a question cut
    off (`cut`: the turn was taken as over at a pause), and has no time. `last_transcript`: the last the page showed
    before the next question (the app asks a cut question's rest with its first part, `voice_continue_s`), and
    `rest_s` when a cut one sounded again after its end (that answer's first sound)."""
    from ...speech import word_error_rate

    opened, starts, rows = rec["mic_opened"], _first_per_slot(rec, spoken), []
    for k, start in enumerate(starts):
        end = start + spoken.end_after(start - opened)
        until = starts[k + 1] if k + 1 < len(starts) else float("inf")
        play = next((t for t in rec["plays"] if start < t < until), None)
        if play is None:
            continue
        shown_from = start if play < end else end  # a cut question's transcript shows before its speech ends
        texts = [(t, key, text) for t, key, text in rec["log"] if shown_from < t < until and text.strip()]
        shown_transcripts = [text for _, key, text in texts if key == "transcript"]
        transcript = shown_transcripts[0] if shown_transcripts else ""
        shown = [m for m in (READOUT.search(text) for _, key, text in texts if key == "readout") if m]
        page = dict(zip(("page_stt_s", "page_ttft_s", "page_first_sound_s"),
                        map(pg.seconds, shown[-1].groups()) if shown else (None,) * 3))
        question = spoken.question_at(start - opened)
        after = next((t for t in rec["plays"] if end < t < until), None) if play < end else None
        rows.append({"total_s": play - end, "cut": bool(play < end), "question": question, "transcript": transcript,
                     "wer": word_error_rate(question, transcript), **page,
                     "last_transcript": shown_transcripts[-1] if shown_transcripts else "",  # a cut one's rest
                     "rest_s": None if after is None else after - end})  # a cut one answered again after its end
    return rows


def _first_per_slot(rec: dict, spoken) -> list[float]:
    """The first speech start heard in each slot of the looping microphone file."""
    out, seen = [], set()
    for start in rec["speech_starts"]:
        slot = spoken.slot_at(start - rec["mic_opened"])
        if slot not in seen:
            seen.add(slot)
            out.append(start)
    return out


def barge_in(page, turns: int, timeout_s: float, spoken=None) -> dict:
    """Hands-free while the fake microphone asks a question every few seconds (media.SpokenQuestions with slots
    shorter than an answer's speech), so each question after the first is spoken over the answer to the one before.
    Per answer cut off: the new question's speech start (the page's microphone stream) -> the voice line holding
    or hushing the sound (ui/voice/link.js); and every transcript the page showed."""
    page.get_by_role("tab", name="Voice + camera").click()
    pg.watch(page, "transcript", "#voice-transcript textarea")
    page.locator("#voice-start").click()
    end = time.time() + timeout_s
    while time.time() < end and len(_barge_rows(page, spoken)) < turns:
        time.sleep(0.5)
    rows = _barge_rows(page, spoken)
    page.locator("#voice-stop").click()
    shown = [text for _, key, text in pg.recorded(page)["log"] if key == "transcript" and text.strip()]
    return {"runs": rows[:turns], "transcripts": shown}


def _barge_rows(page, spoken=None) -> list[dict]:
    line = page.evaluate("() => [window.__fvLink.hushes, window.__fvLink.holds]")
    return barge_rows(pg.recorded(page), *line, spoken=spoken)


def barge_rows(rec: dict, hushes: list[dict], holds: list[dict] = (), spoken=None) -> list[dict]:
    """One row per question that stopped a sound: its speech start (the page's microphone stream) -> the first
    moment the sound stood still after it, a hold (`voice_barge_in_ms` of speech; not one that played on) or a
    hush (the question), and how long after the answer's last piece began to sound the question began
    (`after_sound_s`; the bench's answers are one piece each, so the answer's first sound): within the app's
    `voice_echo_settle_s` (0.6 s) speech must last `voice_echo_speech_ms` (0.4 s) to stop an answer, by design
    (the echo guard), so such a row takes at least that long. With `spoken` (media.SpokenQuestions), a question
    starts at its slot's first start (a person's pause mid-question is no new one) and each row names it."""
    stills = sorted([(h["at"] / 1000, h["stopped"], "hush") for h in hushes if h["stopped"]]
                    + [(h["at"] / 1000, h["sounding"], "hold") for h in holds if h["sounding"] and not h["resumed"]])
    rows, taken = [], set()
    starts = rec["speech_starts"] if spoken is None else _first_per_slot(rec, spoken)  # a pause is no new question
    for at, stopped, how in stills:
        start = max((s for s in starts if s < at), default=None)
        if start is not None and start not in taken:
            taken.add(start)
            sound = max((t for t in rec["plays"] if t < start), default=None)
            rows.append({"stop_s": at - start, "sounds_stopped": stopped, "by": how,
                         "after_sound_s": None if sound is None else start - sound})
            if spoken is not None:
                rows[-1]["question"] = spoken.question_at(start - rec["mic_opened"])
    return rows
