"""The end-of-turn rules compared on spoken questions, in real time (bench-voice and the journeys use this).

`hear_turn()` plays a question into a `TurnTaker` one microphone chunk at a time, as the page sends them, and
waits for a verdict only until the next chunk is due. `paused_questions()` speaks questions with a pause in the
middle ("What is written… on the sign?"); `cut_off()` counts the rules that took such a pause for the end.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

RATE = 16_000
# A turn that ends this long before the question's last sound cut the person off (a rule's pause is 0.12 s); turns
# that end at the last sound end within 0.14 s of it on people's speech (Silero live vs over a whole recording)
CUT_S = 0.3
_VERDICT_WAIT_S = 60.0  # `hear_turn(realtime=False)`: a verdict that takes longer than this is a hang
# (first part, second part): spoken with `pause_s` of silence between them. Some first parts end on a word a
# finished question cannot end on ("What color is"), some read as a whole question ("What am I holding").
PAUSED = (("What is written", "on the sign?"), ("What color is", "the shirt I am wearing?"),
          ("How many people", "can you see behind me?"), ("Can you read", "the text on this page?"),
          ("What am I holding", "in my right hand?"), ("Is there anything unusual", "on the table?"),
          ("What kind of", "animal is that?"), ("Where is the", "red cup?"),
          ("Tell me what", "you see on the screen."), ("Which book is", "on the top shelf?"),
          ("What does the", "label say?"), ("Is the door", "open or closed?"),
          ("How old is", "the man in the picture?"), ("What is the", "name of this street?"),
          ("Can you describe", "the room around me?"), ("What brand is", "this laptop?"),
          ("Who is standing", "next to the window?"), ("What time does", "the clock show?"),
          ("Is it raining", "outside the window?"), ("What is on", "the plate in front of me?"))  # fmt: skip


@dataclass(frozen=True)
class Spoken:
    """A question as the microphone hears it: 16 kHz audio with silence around it, and where its speech is."""

    audio: np.ndarray  # (n,) float32
    text: str
    start_s: float  # speech starts
    end_s: float  # speech ends (the question is over)
    pause_s: tuple[float, float] | None = None  # (from, to): the silence in the middle, if any


def speak(backend, parts: tuple[str, ...], wpm: int, pause_s: float = 0.5, voice: str = "en-us",
          lead_s: float = 0.5, tail_s: float = 2.5) -> Spoken:
    """eSpeak NG says each part; `pause_s` of silence between parts, `lead_s` before, `tail_s` after."""
    from ..speech import to_mono_16k

    pieces, bounds, t = [np.zeros(int(lead_s * RATE), np.float32)], [], lead_s
    for i, part in enumerate(parts):
        speech = to_mono_16k(backend.sample_rate, backend.synthesize(part, voice, wpm))
        loud = np.flatnonzero(np.abs(speech) > 0.02)  # (k,) where the voice is
        speech = speech[loud[0] : loud[-1] + 1]
        if i:
            pieces.append(np.zeros(int(pause_s * RATE), np.float32))
            t += pause_s
        bounds.append((t, t + speech.size / RATE))
        pieces.append(speech)
        t += speech.size / RATE
    pieces.append(np.zeros(int(tail_s * RATE), np.float32))
    pause = (bounds[0][1], bounds[1][0]) if len(parts) > 1 else None
    return Spoken(np.concatenate(pieces), " ".join(parts), bounds[0][0], bounds[-1][1], pause)


def hear_turn(taker, audio: np.ndarray, chunk_s: float, on_event=None, realtime: bool = True):
    """Feed `audio` in real time, `chunk_s` per chunk, until the turn ends -> (TurnEnded or None, seconds
    from the first chunk to the end being known). `on_event(event)` is called on every other event.
    `realtime=False`: no waiting for the microphone, every verdict waited for after its chunk, and the seconds are
    the audio's (when the end would be known on a machine infinitely fast): the same on every machine."""
    from ..speech.turn import TurnEnded

    step = int(chunk_s * RATE)
    t0 = time.perf_counter()
    for k in range(0, audio.size, step):
        if realtime:
            time.sleep(max(0.0, t0 + (k + step) / RATE - time.perf_counter()))  # the microphone sends it now
        events = taker.feed(RATE, audio[k : k + step])
        # a verdict: until the next chunk is due, or however long it takes
        events += taker.settle(t0 + (k + 2 * step) / RATE - time.perf_counter() if realtime else _VERDICT_WAIT_S)
        for event in events:
            if isinstance(event, TurnEnded):
                return event, time.perf_counter() - t0 if realtime else (k + step) / RATE
            if on_event is not None:
                on_event(event)
    return None, time.perf_counter() - t0 if realtime else audio.size / RATE


def cut_off(taker_for, rules: tuple[str, ...], questions: list[Spoken], chunk_s: float) -> dict:
    """Per rule: how many of `questions` (each with a pause in the middle) ended at that pause (`cut`), and
    how many never ended at all (`never_ended`: a rule that hears no end fails, it does not 'cut none')."""
    out = {}
    for rule in rules:
        rows = []
        for q in questions:
            ended, at = hear_turn(taker_for(rule), q.audio, chunk_s)
            cut = ended is not None and q.pause_s is not None and ended.end_s < q.pause_s[1]
            heard = ended.transcript.result().text if ended is not None and ended.transcript is not None else None
            rows.append({"question": q.text, "cut": cut, "ended_by": ended.by if ended else None,
                         "after_end_s": None if ended is None else at - q.end_s, "transcript_at_end": heard,
                         "verdict": ended.verdict.reason if ended is not None and ended.verdict else None})
        out[rule] = {"cut": sum(r["cut"] for r in rows), "never_ended": sum(r["ended_by"] is None for r in rows),
                     "of": len(rows), "runs": rows}
    return out
