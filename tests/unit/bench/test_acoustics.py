"""The echo walk's modelled room (`--echo-room`): the numbers it states are the ones it applies."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from fastvlm.bench.acoustics import BLOCK, RATE, Room, RoomModel, band_pass, impulse_response, person_in, through

QUIET = dataclasses.replace(RoomModel(), noise_dbfs=-400.0)  # no microphone noise: outputs compare exactly


def gain_at(h: np.ndarray, hz: float) -> float:
    return abs(np.sum(h * np.exp(-2j * np.pi * hz / RATE * np.arange(h.size))))


def test_the_band_pass_keeps_speech_and_drops_what_a_small_loudspeaker_cannot_play():
    h = band_pass(200, 6000)
    assert gain_at(h, 1000) == pytest.approx(1, abs=0.02)
    assert gain_at(h, 50) < 0.2 and gain_at(h, 7500) < 0.1


def test_the_impulse_response_has_the_stated_delay_level_and_decay():
    model = RoomModel()
    h = impulse_response(model)
    delay = int(model.delay_ms * RATE / 1000) + 64  # the band-pass's own group delay: (129 - 1) / 2
    assert int(np.argmax(np.abs(h))) == delay
    direct = impulse_response(dataclasses.replace(model, reverb_db=-400.0))
    assert gain_at(direct, 1000) == pytest.approx(10 ** (model.gain_db / 20), rel=0.005)  # in the band
    assert np.abs(h[: delay - 64]).max() == 0  # nothing arrives before the direct sound
    tail = h[delay + int(0.003 * RATE) :]
    first, last = (np.sum(tail[i * 1600 : (i + 1) * 1600] ** 2) for i in (0, 3))  # 0-0.1 s and 0.3-0.4 s
    assert 10 * np.log10(last / first) == pytest.approx(-60 * 0.3 / model.rt60_s, abs=1)  # 60 dB per rt60_s
    assert h.size == delay - 64 + int(model.rt60_s * RATE) + 128  # then it is over


@pytest.mark.parametrize("block", [BLOCK, 160])
def test_block_by_block_is_the_whole_convolution_of_the_loudspeakers_sound(block):
    x = np.random.default_rng(3).uniform(-0.5, 0.5, 40 * block)  # under the microphone's full scale
    room = Room(QUIET, block)
    streamed = np.concatenate([room(x[i : i + block]) for i in range(0, x.size, block)])
    driven = np.tanh(QUIET.drive * x) / np.tanh(QUIET.drive)
    whole = np.convolve(driven, impulse_response(QUIET))[: x.size]
    np.testing.assert_allclose(streamed, whole, atol=1e-5)


def test_the_microphone_hears_its_own_noise_in_silence():
    room = Room(RoomModel())
    heard = np.concatenate([room(np.zeros(BLOCK)) for _ in range(50)])
    assert 20 * np.log10(np.sqrt(np.mean(heard**2))) == pytest.approx(RoomModel().noise_dbfs, abs=0.5)


@pytest.mark.parametrize("room", ["office", "reverberant"])
def test_a_person_in_a_room_is_heard_through_its_reverberation_alone(room):
    model = dataclasses.replace(person_in(room), noise_dbfs=-400.0)
    x = np.random.default_rng(5).uniform(-0.2, 0.2, 3 * RATE + 123)  # under full scale with its reverberation
    heard = through(model, x)
    assert heard.shape == x.shape  # a recording keeps its length and its times
    np.testing.assert_allclose(heard, np.convolve(x, impulse_response(model))[: x.size], atol=1e-5)  # linear
    np.testing.assert_allclose(through(model, 0.5 * x), 0.5 * heard, atol=1e-6)  # no loudspeaker's clipping
    assert gain_at(impulse_response(dataclasses.replace(model, reverb_db=-400.0)), 100) == pytest.approx(1, abs=0.05)


@pytest.mark.parametrize("reverb_db", [-6.0, 0.0])
def test_the_tail_carries_the_stated_energy_against_the_direct_sound(reverb_db):
    full_band = dataclasses.replace(RoomModel(), reverb_db=reverb_db, low_hz=0.0, high_hz=RATE / 2, gain_db=0.0)
    h = impulse_response(full_band)  # the band-pass is then one sample: direct sound and tail apart
    at = int(full_band.delay_ms * RATE / 1000) + 64
    assert h[at] == pytest.approx(1.0) and np.abs(h[at + 1 : at + int(0.003 * RATE)]).max() < 1e-12  # a gap first
    assert 10 * np.log10(np.sum(h[at + 1 :] ** 2)) == pytest.approx(reverb_db, abs=1e-6)


def test_the_microphone_clips_at_full_scale():
    loud = Room(dataclasses.replace(RoomModel(), gain_db=6.0))
    heard = np.concatenate([loud(np.full(BLOCK, 0.9)) for _ in range(3)])
    assert heard.max() == 1.0 and heard.min() >= -1.0
