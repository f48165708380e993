"""The upload guards' edges (ui/inputs.py; their main cases: test_ui_widgets.py, test_ui_voice_tab.py): a file gone
however it is noticed, toasts without a logged traceback, a recording exactly the longest allowed, an unreadable
recording's reason."""

import threading

import gradio as gr
import numpy as np
import pytest
from gradio.data_classes import FileData, ImageData

from fastvlm.speech.audio import write_wav
from ui.inputs import GONE, UNREADABLE, Refused, bounded_frames, bounded_recordings, readable_uploads


def failing(error):
    def decode(payload):
        raise error

    return decode


def test_a_file_not_found_while_decoding_is_gone_even_without_a_path_and_no_toast_logs_a_traceback(tmp_path):
    box = gr.Image(type="filepath", image_mode=None)
    box.preprocess = failing(FileNotFoundError("swept"))
    with pytest.raises(gr.Error) as gone:
        readable_uploads(box).preprocess(ImageData(path=None, url="http://x/a.png"))
    assert gone.value.message == GONE and gone.value.print_exception is False
    bad = tmp_path / "a.png"
    bad.write_bytes(b"not a png")
    with pytest.raises(gr.Error) as unreadable:
        readable_uploads(gr.Image(type="filepath", image_mode=None)).preprocess(ImageData(path=str(bad)))
    assert unreadable.value.message == UNREADABLE and unreadable.value.print_exception is False
    with pytest.raises(gr.Error) as frame:
        bounded_frames(gr.Image(type="numpy"), threading.Semaphore(1)).preprocess(ImageData(path=str(bad)))
    assert frame.value.print_exception is False


def test_a_recording_exactly_the_longest_allowed_is_taken_and_an_unreadable_one_says_why(tmp_path):
    write_wav(tmp_path / "2s.wav", 16_000, np.zeros(32_000, np.int16))
    box = bounded_recordings(gr.Audio(type="numpy"), max_s=2.0)
    rate, samples = box.preprocess(FileData(path=str(tmp_path / "2s.wav")))
    assert rate == 16_000 and len(samples) == 32_000
    folder = tmp_path / "folder.wav"
    folder.mkdir()
    refused = box.preprocess(FileData(path=str(folder)))
    assert isinstance(refused, Refused)
    assert refused.reason.startswith("The recording could not be read (Is a directory)")  # strerror, not repr
