"""What one person's page may cost: its session states are freed once it has been closed for Gradio's grace period
(the running answer stops, the Live tab's last frame goes), and a camera's endpoint refuses a huge file before
decoding it (Gradio's own state holder and components, fakes)."""

import asyncio

import gradio as gr
import numpy as np
import pytest
from gradio.data_classes import ImageData
from gradio.state_holder import StateHolder
from PIL import Image, ImageFile

from fastvlm import EngineConfig
from fastvlm.engine.engine import Engine
from tests.fakes import FakeLM, FakeVision
from ui import create_app
from ui.tab_image import ImageSession
from ui.tab_live import LiveSession, remember


def test_a_closed_pages_sessions_are_freed_and_their_answers_stopped():
    engine = Engine(FakeVision(), FakeLM(b"x"), EngineConfig(vision_path="v.onnx", llm_path="m.gguf",
                                                              resolution=128, threads=1))
    demo = create_app(engine)
    holder = StateHolder()
    holder.set_blocks(demo)
    page = holder["one person"]
    load = next(fn for fn in demo.fns.values() if fn.name == "_keep_sessions")  # runs as the page loads
    asyncio.run(demo.process_api(load, [None] * len(load.inputs), state=page))
    states = {type(block.value): block._id for block in demo.blocks.values() if isinstance(block, gr.State)}
    image, live = page[states[ImageSession]], page[states[LiveSession]]
    image.turnstile.enter("photo.png")  # a question is being answered (handlers change the sessions in place)
    remember(live, np.zeros((720, 1280, 3), np.uint8))
    page.is_closed, page.STATE_TTL_WHEN_CLOSED = True, 0  # the page closed, the grace period over
    holder.delete_all_expired_state()
    assert image.turnstile.token.cancelled  # was: never (the answer's delete callback never ran)
    assert states[ImageSession] not in page.state_data and states[LiveSession] not in page.state_data  # was: kept


@pytest.mark.parametrize("camera", ["snapshot-camera", "live-camera"])
def test_a_camera_endpoint_refuses_a_huge_image_before_it_is_decoded(tmp_path, camera, monkeypatch):
    """Anyone can send a file to a webcam's endpoint (gradio_client): a 0.2 MB PNG of 81 megapixels would become
    a 243 MB array before the engine's own limit (64 megapixels) is asked."""
    engine = Engine(FakeVision(), FakeLM(b"x"), EngineConfig(vision_path="v.onnx", llm_path="m.gguf",
                                                              resolution=128, threads=1))
    demo = create_app(engine)
    component = next(b for b in demo.blocks.values() if getattr(b, "elem_id", None) == camera)
    huge, fine = tmp_path / "huge.png", tmp_path / "fine.png"
    Image.new("RGB", (9000, 9000)).save(huge)
    Image.new("RGB", (640, 480)).save(fine)
    decoded = []
    monkeypatch.setattr(ImageFile.ImageFile, "load",
                        lambda im, real=ImageFile.ImageFile.load: decoded.append(im.size) or real(im))
    with pytest.raises(gr.Error, match="9000×9000 pixels; the most this app takes is 64 megapixels"):
        component.preprocess(ImageData(path=str(huge), orig_name="huge.png"))
    assert decoded == []  # refused from its header (was: decoded)
    assert component.preprocess(ImageData(path=str(fine), orig_name="fine.png")).shape == (480, 640, 3)
    assert set(decoded) == {(640, 480)}  # (the spy sees a decode)
