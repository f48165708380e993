import numpy as np
import pytest

from fastvlm.engine.events import InputError
from fastvlm.speech.audio import (
    StreamResampler,
    read_wav,
    resample,
    rms,
    sound_ended,
    sound_returns,
    to_int16,
    to_mono_16k,
    write_wav,
)
from fastvlm.speech.config import SpeechConfig


def tone(freq, rate, seconds=1.0, amp=0.5):
    t = np.arange(int(rate * seconds)) / rate
    return (amp * np.sin(2 * np.pi * freq * t)).astype(np.float32)


def peak_hz(x, rate=16_000):
    spectrum = np.abs(np.fft.rfft(x * np.hanning(x.size)))
    return np.fft.rfftfreq(x.size, 1 / rate)[spectrum.argmax()]


@pytest.mark.parametrize("rate", [8_000, 16_000, 22_050, 44_100, 48_000])
def test_resampling_keeps_length_and_pitch(rate):
    out = to_mono_16k(rate, tone(440, rate))
    assert out.dtype == np.float32 and out.ndim == 1
    assert abs(out.size - 16_000) <= 1
    assert abs(peak_hz(out) - 440) < 2
    assert abs(rms(out[200:-200]) - 0.5 / np.sqrt(2)) < 0.02  # level kept


def test_tones_above_the_new_nyquist_are_filtered_not_folded_back():
    out = to_mono_16k(48_000, tone(12_000, 48_000))  # would alias to 4 kHz without the low-pass
    assert rms(out[200:-200]) < 0.01


@pytest.mark.parametrize("rate", [8_000, 22_050, 44_100, 48_000])
@pytest.mark.parametrize("chunk_ms", [10 / 48, 40])  # ~10-sample frames, and the page's 40 ms ones
def test_a_stream_resampled_chunk_by_chunk_is_the_whole_stream_resampled(rate, chunk_ms):
    """No click at the chunks' edges, no extra samples from short ones: the whole stream's output, `delay` later."""
    pcm = (np.random.default_rng(rate).standard_normal(rate // 2) * 3000).astype(np.int16)  # 0.5 s of noise
    whole = resample(pcm.astype(np.float32) / 32768, rate)
    stream, step, out = StreamResampler(), max(1, round(rate * chunk_ms / 1000)), []
    for k in range(0, pcm.size, step):
        out.append(stream(rate, pcm[k : k + step]))
        n = min(k + step, pcm.size)
        assert abs(sum(o.size for o in out) - round(n * 16_000 / rate)) <= 1  # stream time never runs ahead
    out = np.concatenate(out)
    assert 0 < stream.delay <= 10
    np.testing.assert_allclose(out[stream.delay :], whole[: out.size - stream.delay], atol=1e-6)


@pytest.mark.parametrize("rate", [22_050, 44_100, 48_000])
def test_a_recording_shorter_than_the_filter_keeps_its_length(rate):
    for n in (1, 10, 30, 60):
        assert abs(to_mono_16k(rate, np.full(n, 1000, np.int16)).size - n * 16_000 / rate) <= 1


def test_a_stream_at_16k_passes_through_untouched():
    x = tone(440, 16_000, 0.04)
    assert StreamResampler()(16_000, x) is x


def test_pcm_formats_scale_to_unit_range():
    full = np.array([0, 16384, -32768], np.int16)
    np.testing.assert_allclose(to_mono_16k(16_000, full), [0, 0.5, -1.0])
    np.testing.assert_allclose(to_mono_16k(16_000, full.astype(np.int32) << 16), [0, 0.5, -1.0])
    np.testing.assert_allclose(to_mono_16k(16_000, np.array([128, 192, 0], np.uint8)), [0, 0.5, -1.0])


def test_stereo_in_either_layout_is_averaged_to_mono():
    left, right = tone(300, 16_000), np.zeros(16_000, np.float32)
    expected = left / 2
    np.testing.assert_allclose(to_mono_16k(16_000, np.stack([left, right], axis=1)), expected, atol=1e-6)
    np.testing.assert_allclose(to_mono_16k(16_000, np.stack([left, right], axis=0)), expected, atol=1e-6)


@pytest.mark.parametrize(
    "rate, samples, words",
    [
        (16_000, np.zeros(0, np.int16), "empty"),
        (16_000, np.array([0.1, np.nan], np.float32), "NaN"),
        (16_000, np.array([0.1, np.inf], np.float32), "NaN or infinite"),
        (16_000, np.zeros((2, 2, 2), np.float32), "shape"),
        (16_000, np.zeros((100, 100), np.float32), "channel"),
        (16_000, np.array(["a"]), "int16"),
        (0, np.zeros(10, np.int16), "sample rate"),
        (16_000.5, np.zeros(10, np.int16), "sample rate"),
    ],
)
def test_broken_audio_is_refused_with_a_reason(rate, samples, words):
    with pytest.raises(InputError, match=words):
        to_mono_16k(rate, samples)


def test_resample_of_nothing_is_nothing():
    assert resample(np.zeros(0, np.float32), 48_000).size == 0


def sine(seconds, amplitude):
    return (amplitude * np.sin(np.arange(int(16_000 * seconds)) * 0.3)).astype(np.float32)


@pytest.mark.parametrize("pause, back", [
    ([sine(0.5, 0)], False),  # digital silence
    ([sine(0.45, 0), sine(0.05, 0.1)], True),  # a voice 50 ms ago
    ([sine(0.05, 0.3), sine(0.45, 0)], False),  # the tail of the last word, long before the last 100 ms
    ([sine(0.45, 0.01), sine(0.05, 0.015)], False),  # a hum 3.5 dB up: the room, not a voice
    ([sine(0.45, 0.01), sine(0.05, 0.1)], True),  # 20 dB over the room's hum
    ([sine(0.45, 0), sine(0.05, 0.002)], False),  # below -50 dBFS
])  # fmt: skip
def test_sound_returns_hears_a_voice_come_back_over_the_pause_level(pause, back):
    assert sound_returns(np.concatenate(pause), recent=1600) is back


def test_sound_returns_on_pauses_as_short_as_its_window_or_a_block():
    loud = sine(0.016, 0.1)  # two 8 ms blocks
    assert sound_returns(loud, recent=1600)  # all of it recent: only the -50 dBFS floor to pass
    assert sound_returns(loud[:128], recent=1600) and not sound_returns(loud[:100], recent=1600)  # under a block
    assert sound_returns(np.concatenate([sine(0.096, 0), loud[:128]]), recent=50)  # less than a block: the last one
    assert not sound_returns(np.concatenate([sine(0.096, 0), loud[:128], sine(0.008, 0)]), recent=50)  # only it


LEAD = 1536  # 96 ms: twelve 8 ms blocks before where the VAD put the pause's start


def before_pause(*pieces, room=0.0):
    """The last 96 ms of `pieces` (the lead), then 0.2 s of pause at the room's level."""
    return np.concatenate([np.concatenate(pieces)[-LEAD:], sine(0.2, room)])


@pytest.mark.parametrize("audio, quiet_blocks", [
    (before_pause(sine(0.2, 0.3), sine(0.056, 0)), 7),  # the voice stopped 56 ms before the VAD said so
    (before_pause(sine(0.2, 0.3)), 0),  # the VAD was right
    (before_pause(sine(0.1, 0.3), sine(0.1, 0)), 12),  # it stopped before the lead: all of it is quiet
    (before_pause(sine(0.1, 0.3), sine(0.04, 0.03), room=0.01), 5),  # a tail 9.5 dB over the room: quiet
    (before_pause(sine(0.1, 0.3), sine(0.04, 0.1), room=0.01), 0),  # a soft tail 20 dB over the room: sound
    (before_pause(sine(0.1, 0.3), sine(0.04, 0.004)), 5),  # a tail just below -50 dBFS (RMS 0.0028): quiet
    (before_pause(sine(0.2, 0.3), sine(0.024, 0), sine(0.008, 0.3), sine(0.024, 0)), 3),  # after its last sound
])  # fmt: skip
def test_sound_ended_finds_where_the_voice_stopped_before_the_vads_pause(audio, quiet_blocks):
    assert sound_ended(audio, LEAD) == quiet_blocks * 128


def test_sound_ended_counts_whole_blocks_back_from_the_pause_and_needs_a_pause_heard():
    audio = before_pause(sine(0.2, 0.3), sine(0.056, 0))
    assert sound_ended(np.concatenate([sine(0.003, 0.3), audio]), LEAD + 50) == 7 * 128  # 50 samples: no block
    assert sound_ended(audio[:LEAD], LEAD) == sound_ended(audio[: LEAD + 127], LEAD) == 0  # no quiet level yet
    assert sound_ended(audio, 0) == 0  # nothing before the pause kept
    assert sound_ended(audio[: LEAD + 128], LEAD) == 7 * 128
    for lead in (-1, audio.size + 1):
        with pytest.raises(ValueError, match="lead"):
            sound_ended(audio, lead)


def test_the_limits_of_what_a_microphone_may_send_are_accepted():
    for rate in (1_000, 384_000):
        assert to_mono_16k(rate, np.full(4_000, 0.25, np.float32)).size > 0
    eight = np.zeros((1_000, 8), np.float32)
    eight[:, 0] = 0.8
    np.testing.assert_allclose(to_mono_16k(16_000, eight), np.full(1_000, 0.1), atol=1e-6)  # (n, 8): 8 channels
    assert rms(np.zeros(0, np.float32)) == 0.0 and rms(np.full(10, 0.5, np.float32)) == pytest.approx(0.5)


def test_float_samples_become_full_scale_int16_and_clip():
    assert to_int16(np.array([-2.0, -1.0, 0.0, 0.5, 1.0, 3.0], np.float32)).tolist() == [
        -32767, -32767, 0, 16383, 32767, 32767]


def test_wav_round_trip(tmp_path):
    samples = (tone(500, 22_050, 0.1) * 32767).astype(np.int16)
    write_wav(tmp_path / "a.wav", 22_050, samples)
    rate, back = read_wav(tmp_path / "a.wav")
    assert rate == 22_050
    np.testing.assert_array_equal(back, samples)


@pytest.mark.parametrize(
    "field, value",
    [("whisper_model", " "), ("threads", 0), ("max_audio_s", 0), ("end_silence_ms", 10), ("vad_threshold", 1.0),
     ("tts_timeout_s", 0), ("espeak_rate", 20), ("beam_size", 0)],
)  # fmt: skip
def test_config_refuses_unusable_values(field, value):
    with pytest.raises(ValueError):
        SpeechConfig(**{field: value})


def _wav(path, fmt: bytes, data: bytes, data_size: int | None = None, extra: bytes = b"") -> str:
    """A RIFF/WAVE file by hand: `fmt` chunk, an `extra` chunk (e.g. LIST) before the sound, then `data`."""
    import struct

    size = len(data) if data_size is None else data_size
    body = b"WAVE" + b"fmt " + struct.pack("<I", len(fmt)) + fmt + extra + b"data" + struct.pack("<I", size) + data
    path.write_bytes(b"RIFF" + struct.pack("<I", len(body)) + body)
    return str(path)


def test_a_wavs_length_is_read_from_its_header_in_any_sample_format(tmp_path):
    import struct

    from fastvlm.speech.audio import wav_seconds

    write_wav(tmp_path / "pcm.wav", 16_000, np.zeros(24_000, np.int16))
    assert wav_seconds(tmp_path / "pcm.wav") == 1.5
    float_fmt = struct.pack("<HHIIHH", 3, 2, 48_000, 48_000 * 8, 8, 32)  # IEEE float, stereo: 8 bytes a frame
    note = b"LIST" + struct.pack("<I", 5) + b"INFOx" + b"\0"  # an odd-sized chunk, padded, before the sound
    assert wav_seconds(_wav(tmp_path / "f.wav", float_fmt, bytes(48_000 * 8 * 2), extra=note)) == 2.0
    streamed = _wav(tmp_path / "s.wav", float_fmt, bytes(48_000 * 8), data_size=0xFFFFFFFF)  # length never filled in
    assert wav_seconds(streamed) == 1.0
    assert wav_seconds(_wav(tmp_path / "z.wav", float_fmt, bytes(48_000 * 4), data_size=0)) == 0.5  # nor here
    odd = struct.pack("<HHIIHHH", 1, 1, 16_000, 32_000, 2, 16, 0)[:17]  # a fmt chunk of 17 bytes
    assert wav_seconds(_wav(tmp_path / "o.wav", odd, bytes(32_000), extra=b"\0")) == 1.0  # its pad byte after it


def test_a_stereo_wav_is_read_as_frames_of_two_samples(tmp_path):
    import wave

    with wave.open(str(tmp_path / "st.wav"), "wb") as w:
        w.setnchannels(2)
        w.setsampwidth(2)
        w.setframerate(16_000)
        w.writeframes(np.array([1, -1, 2, -2, 3, -3], "<i2").tobytes())
    rate, pcm = read_wav(tmp_path / "st.wav")
    assert rate == 16_000 and pcm.tolist() == [[1, -1], [2, -2], [3, -3]]


@pytest.mark.parametrize(("content", "says"), [
    (b"ID3\x03\x00 an mp3", "not a WAV"),
    (b"RIFF\x04\x00\x00\x00WAVE", "no data chunk"),
    (b"RIFF\x0c\x00\x00\x00WAVEdata\x00\x00\x00\x00", "without a readable format"),
])
def test_a_file_that_is_not_a_whole_wav_is_refused_saying_why(tmp_path, content, says):
    from fastvlm.speech.audio import wav_seconds

    (tmp_path / "x").write_bytes(content)
    with pytest.raises(InputError, match=says):
        wav_seconds(tmp_path / "x")
