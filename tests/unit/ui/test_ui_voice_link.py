"""The voice line's WebSocket (ui/voice/link.py) through Starlette's test client: who may open one, what it
hears, what it sends back, and the limits that close it (fakes: loudness VAD, transcriber, speaker)."""

import json
import time
from contextlib import contextmanager

import numpy as np
import pytest
from starlette.applications import Starlette
from starlette.testclient import TestClient
from starlette.websockets import WebSocketDisconnect

from tests.unit.ui.test_ui_voice import RATE, SETTINGS, make_models, voice
from tests.unit.ui.test_ui_voice_tab import pcm
from fastvlm.api.settings import ApiSettings
from ui.voice.link import BUSY, NO_HELLO, REPLACED, TOO_BIG, TOO_FAST, UNKNOWN, LinkLimits, VoiceLink, crowded
from ui.voice.links import VoiceLinks
from ui.voice.listening import listen
from ui.voice.session import VoiceSession
from ui.voice.tab import check_microphone


def served(links: VoiceLinks) -> TestClient:
    return TestClient(Starlette(routes=[links.route()]))


def listening(tmp_path, links: VoiceLinks) -> tuple[VoiceSession, str]:
    session = VoiceSession(frame=np.zeros((8, 8, 3), np.uint8))
    session.listen(make_models(tmp_path).turn_taker())
    return session, links.issue(session)


@contextmanager
def opened(client: TestClient, token: str, rate: int = 16_000, **connect):
    """The line opened as link.js opens it: the token goes in the first message (the hello), not in the URL."""
    with client.websocket_connect("/voice/link", **connect) as ws:
        ws.send_text(json.dumps({"type": "hello", "token": token, "rate": rate}))
        yield ws


def closed_with(ws) -> tuple[int, str]:
    """How the server closed the line. A hello it must refuse goes last, so a line left open fails, not hangs."""
    ws.send_text(json.dumps({"type": "hello", "rate": 1}))
    with pytest.raises(WebSocketDisconnect) as e:
        while True:
            ws.receive_text()
    return e.value.code, e.value.reason


def silence_then_wait(ws, frames: int, done, wait_s: float = 5.0) -> None:
    """Send `frames` 40 ms frames of silence, then wait up to `wait_s` for `done()` (the server hears them in a
    worker of its own)."""
    for _ in range(frames):
        ws.send_bytes(pcm(np.zeros(640)))
    deadline = time.monotonic() + wait_s
    while not done() and time.monotonic() < deadline:
        time.sleep(0.01)


def test_a_question_over_the_socket_is_heard_and_the_page_told_to_start_and_ask(tmp_path):
    links = VoiceLinks(SETTINGS)
    session, token = listening(tmp_path, links)
    with opened(served(links), token, rate=48_000) as ws:  # a browser that captures at 48 kHz
        audio = np.concatenate([voice(1), np.zeros(RATE)])
        audio48 = np.repeat(audio, 3)  # the same sound at 48 kHz
        for frame in np.split(audio48, 50):
            ws.send_bytes(pcm(frame))
        messages = [ws.receive_json() for _ in range(4)]
        assert [m["type"] for m in messages] == ["hush", "start", "hush", "ask"]
        assert links.open_lines == 1 and session.link is not None and session.questions == 1
        session.link.say(_wav(tmp_path), turn=session.turn)
        spoken = ws.receive_bytes()
        assert int.from_bytes(spoken[:4], "little") == session.turn and int.from_bytes(spoken[4:8], "little") == 16_000
        assert spoken[8:12] == bytes(4) and len(spoken) == 12 + 1600  # a short sentence: one part
    assert session.link is None and links.open_lines == 0  # the page left: the line is gone


def test_frames_that_wait_while_a_slow_one_is_heard_keep_the_time_they_arrived(tmp_path, monkeypatch):
    """A busy server hears a frame late; the frames behind it are stamped as they came, not as they were heard
    (a question's end, and the page's readout, count from there)."""
    heard = []

    def slow_listen(session, rate, chunk, margin, clock=time.monotonic, **kw):
        heard.append((clock(), time.monotonic()))
        if len(heard) == 1:
            time.sleep(0.4)  # the first frame takes long: the next two arrive meanwhile
        return listen(session, rate, chunk, margin, clock=clock, **kw)

    monkeypatch.setattr("ui.voice.link.listen", slow_listen)
    links = VoiceLinks(SETTINGS)
    _, token = listening(tmp_path, links)
    with opened(served(links), token) as ws:
        silence_then_wait(ws, 3, lambda: len(heard) == 3)
    assert len(heard) == 3
    (first, _), *later = heard
    assert all(at - first < 0.2 and when - first >= 0.35 for at, when in later)  # stamped on arrival, heard late


def test_a_frame_that_fails_to_be_heard_is_dropped_and_the_line_hears_the_next(tmp_path, monkeypatch):
    real, calls = VoiceLink.hear, []

    def hear_once_broken(self, data, arrived=None):
        calls.append(len(data))
        if len(calls) == 1:
            raise RuntimeError("a bug in hearing one frame")
        return real(self, data, arrived)

    monkeypatch.setattr(VoiceLink, "hear", hear_once_broken)
    links = VoiceLinks(SETTINGS)
    session, token = listening(tmp_path, links)
    with opened(served(links), token) as ws:
        silence_then_wait(ws, 3, lambda: session.chunks == 2)
        assert links.open_lines == 1
    assert len(calls) == 3 and session.chunks == 2


def test_an_unknown_token_or_a_revoked_one_opens_nothing(tmp_path):
    links = VoiceLinks(SETTINGS)
    session, token = listening(tmp_path, links)
    client = served(links)
    with opened(client, "guessed") as ws:
        assert closed_with(ws) == UNKNOWN
    links.revoke(token)  # the person's session ended
    with opened(client, token) as ws:
        assert closed_with(ws) == UNKNOWN
    assert session.link is None


def test_revoking_a_token_closes_its_open_line_at_the_next_frame(tmp_path):
    links = VoiceLinks(SETTINGS)
    session, token = listening(tmp_path, links)
    with opened(served(links), token) as ws:
        silence_then_wait(ws, 1, lambda: links.open_lines == 1)
        links.revoke(token)
        ws.send_bytes(pcm(np.zeros(640)))
        assert closed_with(ws) == REPLACED
    assert links.open_lines == 0 and session.link is None


def test_a_line_that_does_not_begin_with_a_hello_carrying_its_token_is_closed(tmp_path):
    links = VoiceLinks(SETTINGS)
    session, token = listening(tmp_path, links)
    client = served(links)
    hellos = ('{"type": "hello"}', '{"type": "hello", "token": ""}', '{"type": "hello", "token": 123}')
    for first in (lambda ws: ws.send_bytes(pcm(np.zeros(640))), *(lambda ws, h=h: ws.send_text(h) for h in hellos)):
        with client.websocket_connect("/voice/link") as ws:
            first(ws)
            with pytest.raises(WebSocketDisconnect) as e:
                ws.receive_text()
            assert (e.value.code, e.value.reason) == NO_HELLO
    with pytest.raises(WebSocketDisconnect), client.websocket_connect(f"/voice/link/{token}") as ws:
        ws.receive_text()  # the token in the path opens nothing
    assert session.link is None and links.open_lines == 0


def test_a_new_start_replaces_the_token_and_at_most_max_lines_are_open(tmp_path):
    links = VoiceLinks(SETTINGS, LinkLimits(max_lines=1))
    first, old = listening(tmp_path, links)
    new = links.issue(first)
    assert links.session(old) is None and links.session(new) is first
    second, other = listening(tmp_path, links)
    client = served(links)
    with opened(client, new) as ws:
        ws.send_bytes(pcm(np.zeros(640)))
        with opened(client, other) as refused:
            assert closed_with(refused) == BUSY
        ws.send_bytes(pcm(np.zeros(640)))  # the first line still works
    assert links.open_lines == 0
    with pytest.warns(UserWarning, match="could not start: too many voice lines are open"):
        check_microphone(second, 0)  # the person is told why, not to allow the microphone
    links.issue(second)  # Start again: the refusal is forgotten
    assert second.line_refused is None


def test_max_tokens_are_kept_and_one_more_forgets_the_oldest_idle_one(tmp_path):
    links = VoiceLinks(SETTINGS, LinkLimits(max_tokens=2))
    (a, old), (b, kept) = listening(tmp_path, links), listening(tmp_path, links)
    assert links.session(old) is a and links.session(kept) is b
    c, new = listening(tmp_path, links)
    assert (links.session(old), links.session(kept), links.session(new)) == (None, b, c)


def test_a_token_forgotten_before_its_line_opened_is_told_as_expired_not_as_the_microphone(tmp_path):
    """More Starts than `max_tokens` forget the oldest idle token; if its page opens the line after that, the
    person hears that the line expired (press Start again), not to allow the microphone."""
    links = VoiceLinks(SETTINGS, LinkLimits(max_tokens=1))
    first, old = listening(tmp_path, links)
    listening(tmp_path, links)  # someone else's Start: `first`'s token is forgotten
    with opened(served(links), old) as refused:
        assert closed_with(refused) == UNKNOWN
    with pytest.warns(UserWarning, match="could not start: this voice line is unknown or expired: press Start"):
        check_microphone(first, 0)


def until(done, wait_s: float = 5.0) -> None:
    """Wait for `done()` (a line's hello is heard by the server in its own time), failing after `wait_s`."""
    deadline = time.monotonic() + wait_s
    while not done() and time.monotonic() < deadline:
        time.sleep(0.01)
    assert done()


def test_one_address_behind_the_proxy_opens_at_most_max_lines_per_client_and_a_closed_line_frees_its_place(
        tmp_path):
    """Behind nginx every line comes from 127.0.0.1: the cap counts the client it forwards, as the API judges it;
    this machine's own browser (loopback, nothing forwarded) is not counted."""
    links = VoiceLinks(SETTINGS, LinkLimits(max_lines_per_client=2), api=ApiSettings(trusted_proxies=("127.0.0.1",)))
    sessions, tokens = zip(*(listening(tmp_path, links) for _ in range(5)))
    proxy = TestClient(Starlette(routes=[links.route()]), client=("127.0.0.1", 50000))

    def line(i: int, address: str):
        return opened(proxy, tokens[i], headers={"X-Forwarded-For": f"10.9.9.9, {address}"})  # nginx's is last

    with line(0, "203.0.113.7"):
        with line(1, "203.0.113.7"):
            until(lambda: links.open_lines == 2)
            with line(2, "203.0.113.7") as refused:
                assert closed_with(refused) == crowded(2)
            with pytest.warns(UserWarning, match="this address already has 2 voice lines open: close the app in"):
                check_microphone(sessions[2], 0)  # what the person is told after Start
            with line(3, "198.51.100.9"), opened(proxy, tokens[4]):  # another address; this machine's own
                until(lambda: links.open_lines == 4)
        assert links.open_lines == 1
        with line(2, "203.0.113.7"):  # the closed line's place is free again
            until(lambda: sessions[2].link is not None)
    assert links.open_lines == 0


def test_a_forwarding_header_from_a_peer_not_trusted_counts_against_the_peer_and_reopening_a_line_is_no_new_one(
        tmp_path):
    links = VoiceLinks(SETTINGS, LinkLimits(max_lines_per_client=2))
    sessions, tokens = zip(*(listening(tmp_path, links) for _ in range(3)))
    client = served(links)  # its peer is "testclient"

    def line(i: int):
        return opened(client, tokens[i], headers={"X-Forwarded-For": f"198.51.100.{i}"})  # written by the client

    with line(0) as first, line(1):
        until(lambda: links.open_lines == 2)
        with line(2) as refused:
            assert closed_with(refused) == crowded(2)
        before = sessions[0].link
        with line(0) as again:  # the page's line opened again (same token): it replaces the first, is no third
            until(lambda: sessions[0].link is not before)
            first.send_bytes(pcm(np.zeros(640)))
            assert closed_with(first) == REPLACED
            with line(2) as refused:
                assert closed_with(refused) == crowded(2)
            again.send_bytes(pcm(np.zeros(640)))
    assert links.open_lines == 0


def test_oversized_frames_and_audio_faster_than_real_time_close_the_line(tmp_path):
    links = VoiceLinks(SETTINGS, LinkLimits(max_frame_s=0.5, ahead_s=1.0))
    session, token = listening(tmp_path, links)
    client = served(links)
    with opened(client, token) as ws:
        ws.send_bytes(pcm(np.zeros(RATE)))  # 1 s in one frame
        assert closed_with(ws) == TOO_BIG
    with opened(client, token) as ws:
        for _ in range(8):  # 3.2 s of audio at once: more than 1 s ahead of the clock
            ws.send_bytes(pcm(np.zeros(6400)))
        assert closed_with(ws) == TOO_FAST
    assert session.heard_s < 1.5  # what was refused was never fed to the detector


def test_a_hello_with_an_impossible_rate_or_an_odd_frame_is_refused(tmp_path):
    links = VoiceLinks(SETTINGS)
    _, token = listening(tmp_path, links)
    client = served(links)
    for bad in (lambda ws: ws.send_text(json.dumps({"rate": 12345})), lambda ws: ws.send_text("not json"),
                lambda ws: ws.send_bytes(b"\x00\x01\x02")):
        with opened(client, token) as ws:
            bad(ws)
            assert closed_with(ws)[0] == 1003


def _wav(folder):
    from fastvlm.speech.audio import write_wav

    path = folder / "sentence.wav"
    write_wav(path, RATE, np.zeros(800, np.int16))
    return path


def test_a_mono_16_bit_wav_goes_as_raw_samples_in_half_second_parts_and_anything_else_as_the_file(tmp_path):
    import struct
    import wave

    from ui.voice.link import sound_messages

    samples = (np.arange(27_000, dtype=np.int16) % 2000).tobytes()  # 1.22 s at 22.05 kHz
    with wave.open(str(tmp_path / "a.wav"), "wb") as w:
        w.setnchannels(1), w.setsampwidth(2), w.setframerate(22_050), w.writeframes(samples)
    parts = sound_messages(tmp_path / "a.wav", turn=7)
    assert [struct.unpack("<III", m[:12]) for m in parts] == [(7, 22_050, 0), (7, 22_050, 1), (7, 22_050, 2)]
    assert [len(m) - 12 for m in parts] == [22_050, 22_050, 2 * 27_000 - 44_100]  # 0.5 s, 0.5 s, the rest
    assert b"".join(m[12:] for m in parts) == samples
    with wave.open(str(tmp_path / "b.wav"), "wb") as w:  # stereo: the page decodes the file itself
        w.setnchannels(2), w.setsampwidth(2), w.setframerate(22_050), w.writeframes(samples)
    (tmp_path / "c.mp3").write_bytes(b"ID3 an mp3")
    for name in ("b.wav", "c.mp3"):
        whole = struct.pack("<III", 7, 0, 0) + (tmp_path / name).read_bytes()
        assert sound_messages(tmp_path / name, turn=7) == [whole]
