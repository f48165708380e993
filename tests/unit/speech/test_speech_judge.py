"""Smart Turn's input as the judge builds it, with a fake ONNX session (the model itself: tests/integration)."""

import numpy as np
import pytest

from fastvlm.speech.judge import SmartTurnJudge, Verdict

RATE = 16_000


class RecordingSession:
    """Stands in for onnxruntime: keeps each input and answers P(finished) = `p`."""

    def __init__(self, p: float) -> None:
        self.p, self.inputs = p, []

    def run(self, outputs, feeds):
        self.inputs.append(feeds["input_features"])
        return [np.array([[self.p]], np.float32)]


def noise(seconds: float, level: float, seed: int = 0) -> np.ndarray:
    return (level * np.random.default_rng(seed).standard_normal(int(seconds * RATE))).astype(np.float32)


def heard(audio: np.ndarray) -> np.ndarray:
    session = RecordingSession(0.9)
    SmartTurnJudge(session).judge(audio)
    [features] = session.inputs
    return features


def test_the_model_hears_the_last_8_s_at_the_end_of_its_window():
    speech = noise(1.0, 0.1)
    features = heard(speech)
    assert features.shape == (1, 80, 800) and features.dtype == np.float32
    energy = features[0].mean(axis=0)  # (800,) one value per 10 ms frame
    assert energy[-90:].min() > energy[:690].max()  # the last second is the speech, zeros before it
    older = np.concatenate([noise(2.0, 0.5, seed=1), noise(8.0, 0.1)])
    np.testing.assert_allclose(heard(older), heard(older[-8 * RATE:]), atol=1e-5)  # the first 2 s are not heard


def test_loudness_and_a_dc_offset_do_not_change_what_the_model_hears():
    speech = noise(2.0, 0.01)
    np.testing.assert_allclose(heard(speech), heard(speech * 20), atol=1e-3)
    whole = noise(8.0, 0.01)  # the window's length: no zeros in front, which the offset would stand out from
    np.testing.assert_allclose(heard(whole), heard(whole + 0.05), atol=1e-3)  # a microphone's offset


def test_finished_from_the_threshold_up_and_never_unsure():
    """The model's verdict is finished or not: never the transcript judge's "unsure", which waits 1 s of silence
    (its own time once landed in that field, making every verdict unsure)."""
    finished = SmartTurnJudge(RecordingSession(0.5), threshold=0.5).judge(noise(1.0, 0.1))
    assert finished.complete and finished.unsure is False
    verdict = SmartTurnJudge(RecordingSession(0.49), threshold=0.5).judge(noise(1.0, 0.1))
    assert not verdict.complete and verdict.probability == np.float32(0.49) and verdict.reason == "p=0.49"
    assert verdict.unsure is False and 0 < verdict.elapsed_s < 1.0  # its own time, for the logs and the bench


def test_a_verdict_takes_all_but_its_outcome_and_reason_by_name():
    with pytest.raises(TypeError):
        Verdict(True, "p=0.90", 0.9, 0.05)  # was: 0.05 became `unsure`
    assert Verdict(True, "p=0.90", probability=0.9, elapsed_s=0.05).unsure is False
