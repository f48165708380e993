"""One answer's spoken sentences (ui/voice/speech_queue.py) with a speaker the test releases sentence by sentence:
made one at a time in order, taken without waiting, waited for, counted, and a sentence made as the queue closes
never played and its file deleted."""

import threading
import time

from fastvlm.speech.tts import Speech
from ui.voice.speech_queue import SpeechQueue


class GatedSpeaker:
    """Each sentence is made only once the test lets it (`release`), or after 10 s (so a failed test still ends:
    the queue's worker is joined at exit); records how many were made at once."""

    def __init__(self, folder):
        self.folder, self.gate, self.lock = folder, threading.Semaphore(0), threading.Lock()
        self.making, self.most_at_once, self.made = 0, 0, []

    def release(self, n=1):
        for _ in range(n):
            self.gate.release()

    def synthesize(self, text):
        with self.lock:
            self.making += 1
            self.most_at_once = max(self.most_at_once, self.making)
        self.gate.acquire(timeout=10)
        path = self.folder / f"{len(self.made)}.wav"
        path.write_bytes(b"RIFF")
        with self.lock:
            self.making -= 1
            self.made.append(text)
        return Speech(path, "gated", "v1")


def until(ready, timeout_s=5.0):
    deadline = time.monotonic() + timeout_s
    while not ready() and time.monotonic() < deadline:
        time.sleep(0.005)
    return ready()


def test_sentences_are_made_one_at_a_time_in_the_order_given(tmp_path):
    speaker = GatedSpeaker(tmp_path)
    queue = SpeechQueue(speaker)
    for text in ("One.", "Two.", "Three."):
        queue.say(text)
    speaker.release(3)
    assert until(lambda: len(speaker.made) == 3)
    assert speaker.made == ["One.", "Two.", "Three."] and speaker.most_at_once == 1


def test_take_never_waits_and_wait_returns_once_the_next_sentence_is_ready(tmp_path):
    speaker = GatedSpeaker(tmp_path)
    queue = SpeechQueue(speaker)
    queue.wait(10)  # nothing to wait for: at once
    queue.say("One.")
    t0 = time.monotonic()
    assert queue.take() is None and time.monotonic() - t0 < 0.5
    threading.Timer(0.1, speaker.release).start()
    queue.wait(10)
    assert time.monotonic() - t0 < 5 and queue.take().path.name == "0.wav"


def test_unspoken_is_what_was_given_and_never_taken(tmp_path):
    speaker = GatedSpeaker(tmp_path)
    queue = SpeechQueue(speaker)
    for text in ("One.", "Two.", "Three."):
        queue.say(text)
    speaker.release()
    queue.wait(5)
    assert queue.take() is not None and queue.taken == 1
    queue.close()
    speaker.release(2)
    assert queue.unspoken() == ["Two.", "Three."]


class ClosesOnSecondEntry:
    """The queue's lock, closing the queue the second time `take` enters it: as if Stop came between finding the
    next sentence ready and taking it."""

    def __init__(self, queue):
        self.queue, self.lock, self.entries = queue, threading.RLock(), 0

    def __enter__(self):
        self.entries += 1
        if self.entries == 2:
            self.queue.close()
        return self.lock.__enter__()

    def __exit__(self, *exc):
        return self.lock.__exit__(*exc)


def test_a_sentence_ready_as_the_queue_closes_is_not_played_and_its_file_is_deleted(tmp_path):
    speaker = GatedSpeaker(tmp_path)
    queue = SpeechQueue(speaker)
    queue.say("One.")
    speaker.release()
    queue.wait(5)
    queue.lock = ClosesOnSecondEntry(queue)
    assert queue.take() is None and queue.closed and queue.taken == 0
    assert not (tmp_path / "0.wav").exists()
