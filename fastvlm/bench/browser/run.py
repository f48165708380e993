"""`bench --journeys --browser`: the journeys walked through the real page in headless Chromium on this machine."""

from __future__ import annotations

import argparse
import logging
import os
import statistics
import tempfile
import time
from contextlib import contextmanager
from dataclasses import asdict, replace
from pathlib import Path

from ..journey_report import BROWSER_TARGETS, draw_journeys, print_journeys, stop_summary, timing, verdicts
from ..journeys import JourneySettings
from ..stats import host_clock, machine_info, stolen_since, write_report
from ..first_piece import first_piece, first_piece_tokens
from ..voice import QUESTIONS
from ..people import recordings
from . import echo, media, serve, walks
from ..acoustics import ROOMS, RoomModel
from . import page as pg

log = logging.getLogger(__name__)
SETTLE_S = 2.0  # after a page loads, before a journey starts: the page's own start-up is not the journey
SLOT_S = 12.0  # seconds per spoken question of `--questions people`, at least (their longest takes 6.6 s)
BARGE_AFTER_S = 0.7  # the barge-in walk: each question starts this long after the answer before it sounds
ROOM_BARGE_INS, ROOM_BARGE_AFTER_S = 8, 2.0  # with --echo-room: questions over answers, this far into their sound
# The fake webcam loops 17.3 s: no multiple of the voice walk's slot (8, 12 or 40 s) up to its 5th question comes
# within 1 s of a multiple of that, so no question's frame is one an earlier question's prepare left in the engine's
# cache (a real camera never sends the same picture twice; with 15 s, 3 slots of 40 s were 8 loops)
CAMERA_FRAMES, CAMERA_FPS = 173, 10
ECHO_LISTEN_S = 22.0  # the echo walk listens this long from an answer's first sound: longer than its speech (~13 s)
LONG_ANSWERS = ("--voice-answer-tokens: each spoken answer decodes that many tokens, so the barge-in walk's questions "
                "meet its decode. Random text has no phrase boundary: an answer's first piece is cut after 12 words "
                "(SentenceChunker's first_phrase_max_words), not at 5 tokens as the reference answer's, so the voice "
                "walk's first sound waits that much more decode; each later piece (up to 250 characters) sounds ~13 "
                "s too (media.ReferenceSpeaker): 96 tokens sound ~50 s, heard to the end with --voice-slot-s 65")
NOTES = {
    "clock": "upload_ask, upload_ask_early, snapshot: the page's clock, from the Submit/Analyse click event to the "
             "first answer text on the page (5 ms polls); page_ttft_s is the TTFT the page displays",
    "live": "median_s: the feed item shown (first token) behind the engine taking the frame up; lag_s: the answer "
            "complete in the feed behind the engine taking the frame up (server clock, same machine). The frame's "
            "own age when taken up (sent every frame_every_s by the page) is not observed and not included",
    "voice": "end of speech: the question's first sound on the page's microphone stream (analyser, 10 ms polls; "
             "since 2026-12-06, the first in its slot) + its known length to the end of speech (before: the "
             "analyser's 600 ms of silence, which splits a question people pause in) -> the first sentence starting "
             "to sound in the page (the voice line's Web Audio start); cut: answered before the question's speech "
             "ended, not timed. Questions by eSpeak NG (offline), as the engine-only journey, or with --questions "
             "people bench-turns' 9 people's questions; the transcript is the one the page shows. Spoken answers end "
             "where bench-voice cuts the first spoken piece (first_piece_tokens: 5, 'You are holding'): random "
             "weights never end a phrase or a sentence, so uncapped the first sound would wait for the whole answer. "
             "As in the engine-only journey, that piece is spoken as the reference's words, not the random tokens "
             "(since 2026-12-03; repeated to ~13 s, as long as the random tokens sounded: media.ReferenceSpeaker). "
             "page_share_median_s: per question, this figure minus the one the page's readout shows (the server's "
             "end of speech -> first sentence sent): the speech's end reaching the server and being heard there, "
             "and the sound reaching the page and starting",
    "barge_in": "a question spoken over the answer to the one before (slots: the longest question + the voice walk's "
                "first sound + 0.7 s): its speech start as the page's microphone stream carries it (the first in its "
                "slot: a person's pause mid-question starts no new one) -> the page "
                "stopping the answer's sound (by: the voice line's hold, since 2026-12-03, or hush); after_sound_s: "
                "the question's speech start after the answer began to sound (the page's Web Audio start). "
                "in_echo_window: stops whose question began within the app's voice_echo_settle_s of that, which must "
                "hear voice_echo_speech_ms of speech to stop it (the echo guard, docs/voice.md), so take at least "
                "that long",
    "echo": "--echo: the page's speaker looped into its microphone at full level (a PulseAudio sink and its "
            "monitor), questions played into it by paplay, then nobody speaks while each answer plays: stopped = "
            "answers barge-in cut off (held_and_played_on: held over a sound, then played on); heard: answers "
            "after which the page showed a question it heard meanwhile (its own voice taken for one, and "
            "answered); echo_control: the same with the page's echo cancellation off; room: with --echo-room, "
            "the modelled loudspeaker and room the answers pass through to the microphone "
            "(bench.acoustics.ROOMS), null when straight; barge_in (with --echo-room): 8 questions each played 2 s "
            "into the answer before's sound, so the person talks over the answer's echo: speech start (paplay "
            "started + the file's 0.3 s lead-in; PulseAudio's latency not counted) -> the sound held or hushed, the "
            "transcript shown for each and their WER",
    "stop": "Stop click event (page clock) -> engine idle (observed in this process); prepare is refused for these "
            "uploads (as when the engine was busy at upload) so that the question itself encodes and prefills",
}


def browser_settings(settings: JourneySettings) -> JourneySettings:
    """The Live tab's timer ticks at whole seconds from 1 s (AppSettings); quick runs get three ticks."""
    cadence = max(1.0, settings.cadence_s)
    return replace(settings, cadence_s=cadence, live_s=max(settings.live_s, 3 * cadence))


def app_settings(settings: JourneySettings):
    from ui import AppSettings

    tokens = max(16, settings.max_tokens)  # the Image tab's slider starts at 16
    # random weights never end a phrase or a sentence: spoken answers end where the first piece would, unless
    # the walk asks for longer ones (`--voice-answer-tokens`)
    spoken = settings.voice_answer_tokens or min(settings.max_tokens,
                                                 first_piece_tokens(AppSettings().voice_first_phrase_words))
    return AppSettings(max_new_tokens=tokens, snapshot_max_new_tokens=tokens, voice_max_new_tokens=spoken,
                       live_max_new_tokens=settings.live_max_tokens, live_interval_s=settings.cadence_s)


def speech_models(threads: int, audio_dir: Path, words_ahead_s: float):
    """Whisper tiny.en (offline), Silero VAD and eSpeak NG saying the reference answer's first piece: the
    engine-only voice journey's chain (`words_ahead_s`: SpeechConfig's)."""
    from fastvlm.speech import EspeakSpeaker, SpeechConfig, WhisperTranscriber, silero_vad
    from ui import AppSettings
    from ui.voice import SpeechModels

    config = SpeechConfig(threads=threads, download=False, audio_dir=audio_dir, words_ahead_s=words_ahead_s)
    speaker = media.ReferenceSpeaker(EspeakSpeaker.load(config), first_piece(AppSettings().voice_first_phrase_words)[1])
    return SpeechModels(WhisperTranscriber.load(config), speaker, silero_vad(), config,
                        "Whisper tiny.en · eSpeak NG (bench)")


def run(args: argparse.Namespace, engine_factory) -> int:
    try:
        serve.sync_playwright()
        if getattr(args, "echo", 0):
            echo.check()
        if args.questions == "people":
            recordings.fetch()  # before the models load: offline and missing is one line, not a traceback
    except (serve.BrowserUnavailable, echo.RoomUnavailable, recordings.PeopleMissing) as e:
        log.error("%s", e)
        return 2
    settings = browser_settings(JourneySettings.from_args(args))
    engine = serve.RecordingEngine(engine_factory(args))
    size = args.resolution or engine.resolution
    report = {"driver": "browser", "machine": machine_info(args.threads), "model": engine.describe(),
              "resolution": size, "settings": asdict(settings), "questions": args.questions,
              "notes": {**NOTES, "voice_answer_tokens": LONG_ANSWERS} if settings.voice_answer_tokens else NOTES,
              "load_before": os.getloadavg()[0]}
    host = host_clock()
    try:
        with tempfile.TemporaryDirectory(prefix="fastvlm-browser-journeys-") as tmp:
            report["journeys"] = _walk_all(engine, settings, Path(tmp), size, args)
    finally:
        engine.close()
    report["load_after"] = os.getloadavg()[0]
    report.update(stolen_since(host))
    report["page_decode_tokens_per_s"] = _median([r["page_tokens_per_s"] for key in ("upload_ask", "upload_ask_early")
                                                  for r in report["journeys"][key]["runs"]])
    report["engine_decode_tokens_per_s"] = _median([r["stats"].tokens_per_s for r in engine.requests
                                                    if r["stats"] is not None and r["stats"].new_tokens > 1])
    report["targets"] = BROWSER_TARGETS
    report["targets_met"] = verdicts(report["journeys"], size, BROWSER_TARGETS)
    print_journeys(report)
    print(f"{'decode':>17}: {report['page_decode_tokens_per_s']:.1f} tok/s as the page shows it (engine "
          f"{report['engine_decode_tokens_per_s']:.1f})")
    if args.report_json:
        write_report(args.report_json, report)
    if args.plot:
        draw_journeys(report, args.plot)
    return 0


def voice_slot_s(settings: JourneySettings, questions: str) -> float:
    """Seconds per question of the voice walk: the settings' (`--voice-slot-s`), at least SLOT_S for people's."""
    return settings.voice_slot_s if questions == "espeak" else max(settings.voice_slot_s, SLOT_S)


def _median(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


def _walk_all(engine, settings: JourneySettings, tmp: Path, size: int, args) -> dict:
    """Every journey, each by a new person (a fresh browser context), in the order of the engine-only report."""
    n = settings.repeats
    uploads = iter(media.write_uploads(tmp / "uploads", 4 * n + 1, seed=size))
    clip = media.write_y4m(tmp / "camera.y4m", 640, 480, frames=CAMERA_FRAMES, fps=CAMERA_FPS)
    spoken = speech = None
    if not args.no_voice:
        spoken = _questions(args.questions, tmp / "questions.wav", slot_s=voice_slot_s(settings, args.questions))
        speech = speech_models(args.threads, tmp / "spoken", settings.voice_words_ahead_s)
    out: dict = {}
    with serve.serve(engine, app_settings(settings), speech) as url, \
            serve.chromium(clip, spoken.path if spoken else None) as browser:
        with _person(browser, url) as page:
            walks.upload_ask(page, next(uploads), settings.typing_s)  # warm-up: the page's first answer
            for key, delay in (("upload_ask", settings.typing_s), ("upload_ask_early", settings.early_s)):
                rows = [walks.upload_ask(page, next(uploads), delay) for _ in range(n)]
                out[key] = _answers(rows, delay)
        with _person(browser, url) as page:
            page.get_by_role("tab", name="Camera snapshot").click()
            out["snapshot"] = _answers([walks.snapshot(page, engine, settings.snapshot_s) for _ in range(n)],
                                       settings.snapshot_s)
        with _person(browser, url) as page:
            out["live"] = _live(walks.live(page, engine, settings.live_s), settings.cadence_s)
        stages = _stages(engine)
        with _person(browser, url) as page:
            stops = [walks.stop(page, engine, next(uploads), at, stages) for at in ("encode", "prefill")
                     for _ in range(n)]
        out["stop"] = {**stop_summary(stops), **stages}
        if spoken is not None:
            with _person(browser, url) as page:
                turns = len(spoken.questions) if args.questions == "people" and not args.quick else settings.voice_runs
                voice = walks.voice(page, spoken, turns, (2 * turns + 2) * spoken.slot_s)
            out["voice"] = _voice(voice)
            slot = 0.3 + max(spoken.spoken_s) + out["voice"]["median_s"] + BARGE_AFTER_S
            out["barge_in"] = _barge_in(browser, url, clip, tmp, settings.voice_runs, round(slot, 1), args.questions)
        if getattr(args, "echo", 0):
            acoustic = ROOMS[args.echo_room] if getattr(args, "echo_room", None) else None
            out["echo"], out["echo_control"] = _echo(browser, url, tmp, args.echo, acoustic)
    return out


def _echo(browser, url: str, tmp: Path, n: int, acoustic: RoomModel | None = None) -> tuple[dict, dict]:
    """`n` answers with the speaker looped into the microphone (straight, or through `acoustic`), then 2 with the
    page's echo cancellation off."""
    questions = echo.write_questions(tmp / "echo", QUESTIONS, n)
    with echo.room(acoustic):
        other = echo.launch(browser)
        try:
            on = echo.walk(other, url, questions, ECHO_LISTEN_S)
            if acoustic is not None:  # and a person talking over the answers in that room
                on["barge_in"] = echo.barge_in(other, url, questions[:ROOM_BARGE_INS + 1], ROOM_BARGE_AFTER_S)
            off = echo.walk(other, url, questions[:2], ECHO_LISTEN_S, cancel_echo=False)
        finally:
            other.close()
    log.info("echo: %d of %d answers stopped by their own voice, %d followed by a question heard from it "
             "(canceller off: %d of %d stopped)", on["stopped"], on["answers"], on["heard"], off["stopped"],
             off["answers"])
    on["room"] = None if acoustic is None else asdict(acoustic)
    return on, off


def _questions(who: str, path: Path, slot_s: float, lead_s: float = 0.5) -> media.SpokenQuestions:
    """The fake microphone's questions: the bench's, spoken by eSpeak NG, or people's (`who="people"`)."""
    if who == "people":
        return media.write_people_questions(path, slot_s, lead_s)
    return media.write_questions(path, QUESTIONS, slot_s, lead_s)


def _barge_in(browser, url: str, clip: Path, tmp: Path, turns: int, slot_s: float, who: str = "espeak") -> dict:
    """Questions asked over the answers (a second Chromium: its microphone file has `slot_s` slots, just longer
    than a question and the voice walk's end of speech -> first sound)."""
    spoken = _questions(who, tmp / "barge.wav", slot_s, lead_s=0.3)
    other = serve.another_chromium(browser, clip, spoken.path)
    try:
        with _person(other, url) as page:
            walk = walks.barge_in(page, turns, (turns + 4) * slot_s, spoken)
    finally:
        other.close()
    from ui import AppSettings

    settle_s = AppSettings().voice_echo_settle_s
    early = [r for r in walk["runs"] if r["after_sound_s"] is not None and r["after_sound_s"] < settle_s]
    return {**timing([r["stop_s"] for r in walk["runs"]] or [float("nan")]), "slot_s": slot_s,
            "stopped": len(walk["runs"]), "in_echo_window": len(early), "questions_shown": len(walk["transcripts"]),
            "runs": walk["runs"]}


@contextmanager
def _person(browser, url: str):
    """A new person with the app open and settled (`SETTLE_S`); their context is closed after."""
    log.info("a new person opens %s", url)
    context, page = pg.open_app(browser, url)
    try:
        time.sleep(SETTLE_S)
        yield page
    finally:
        context.close()


def _answers(rows: list[dict], delay_s: float) -> dict:
    return {**timing([r["ttft_s"] for r in rows]), "delay_s": delay_s,
            "page_ttft_median_s": _median([r["page_ttft_s"] for r in rows]), "runs": rows}


def _live(live: dict, cadence_s: float) -> dict:
    rows = live["runs"]
    lags = [r["lag_s"] for r in rows]
    return {**timing([r["first_text_s"] for r in rows] or [float("nan")]), "cadence_s": cadence_s,
            "offered": live["answered"] + live["skipped"], "answered": live["answered"], "skipped": live["skipped"],
            "lag_s": _median(lags) if lags else None, "lag_p90_s": timing(lags)["p90_s"] if lags else None,
            "page_ttft_median_s": _median([r["page_ttft_s"] for r in rows if r["page_ttft_s"] is not None]),
            "runs": rows}


def _stages(engine) -> dict:
    """Median encode and prefill of the questions that encoded their image (the Live frames): Stop aims at them."""
    cold = [r["stats"] for r in engine.requests if r["stats"] is not None and r["stats"].encode_s > 0
            and r["stats"].stop_reason != "cancelled"]
    if not cold:
        raise RuntimeError("no answered Live frame to time the encode and prefill by: the Live journey failed")
    return {"encode_s": _median([s.encode_s for s in cold]), "prefill_s": _median([s.prefill_s for s in cold])}


def _voice(voice: dict) -> dict:
    """The voice walk's summary: a question cut off (answered before its speech ended) is counted, not timed."""
    rows = [r for r in voice["runs"] if not r["cut"]]
    again = [r["rest_s"] for r in voice["runs"] if r["cut"] and r["rest_s"] is not None]
    return {**timing([r["total_s"] for r in rows] or [float("nan")]), "cut": len(voice["runs"]) - len(rows),
            "cut_answered_again": len(again), "cut_again_median_s": _median(again) if again else None,
            "wer": statistics.fmean(r["wer"] for r in rows) if rows else float("nan"),
            "page_first_sound_median_s": _median([r["page_first_sound_s"] for r in rows
                                                  if r["page_first_sound_s"] is not None]),
            "page_share_median_s": _median([r["total_s"] - r["page_first_sound_s"] for r in rows
                                            if r["page_first_sound_s"] is not None]),
            "questions_heard": voice["heard"], "talked_over": voice["talked_over"], "mic_lead_s": voice["mic_lead_s"],
            "runs": voice["runs"]}
