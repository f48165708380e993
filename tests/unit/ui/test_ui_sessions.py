"""What one person's page may cost: its session states are freed once it has been closed for Gradio's grace period
(the running answers stop, the Live tab's last frame goes, the voice line closes and its token is revoked), and a
camera's endpoint refuses a huge file before decoding it (Gradio's own state holder and components, fakes)."""

import asyncio
import base64
import io
import threading
import time

import gradio as gr
import numpy as np
import pytest
from gradio.data_classes import ImageData
from gradio.state_holder import StateHolder
from PIL import Image, ImageFile

from fastvlm import EngineConfig
from fastvlm.engine.engine import Engine
from tests.fakes import FakeLM, FakeVision
from tests.unit.ui.test_ui_voice import make_engine, make_models
from tests.unit.ui.test_ui_voice_link import closed_with, opened, served, silence_then_wait
from tests.unit.ui.test_ui_voice_tab import pcm
from ui import create_app
from ui.tab_image import ImageSession
from ui.tab_live import LiveSession, remember
from ui.tab_snapshot import SnapshotSession
from ui.voice.link import REPLACED, UNKNOWN
from ui.voice.session import VoiceSession
from ui.inputs import bounded_frames


def loaded_page(demo: gr.Blocks):
    """A page of `demo` as it loads (its sessions written, as `_keep_sessions` does); (holder, page, {type: id})."""
    holder = StateHolder()
    holder.set_blocks(demo)
    page = holder["one person"]
    load = next(fn for fn in demo.fns.values() if fn.name == "_keep_sessions")  # runs as the page loads
    asyncio.run(demo.process_api(load, [None] * len(load.inputs), state=page))
    states = {type(block.value): block._id for block in demo.blocks.values() if isinstance(block, gr.State)}
    return holder, page, states


def close_page(holder: StateHolder, page) -> None:
    page.is_closed, page.STATE_TTL_WHEN_CLOSED = True, 0  # the page closed, the grace period over
    holder.delete_all_expired_state()


def test_a_closed_pages_sessions_are_freed_and_their_answers_stopped():
    engine = Engine(FakeVision(), FakeLM(b"x"), EngineConfig(vision_path="v.onnx", llm_path="m.gguf",
                                                              resolution=128, threads=1))
    holder, page, states = loaded_page(create_app(engine))
    assert set(states) == {ImageSession, SnapshotSession, LiveSession}
    image, snapshot, live = (page[states[kind]] for kind in (ImageSession, SnapshotSession, LiveSession))
    image.turnstile.enter("photo.png")  # a question is being answered (handlers change the sessions in place)
    snapshot.turnstile.enter()
    remember(live, np.zeros((720, 1280, 3), np.uint8))
    close_page(holder, page)
    assert image.turnstile.token.cancelled  # was: never (the answer's delete callback never ran)
    assert snapshot.turnstile.token.cancelled
    assert not set(states.values()) & set(page.state_data)  # was: kept


def test_a_closed_pages_voice_token_is_revoked_and_its_open_line_closed(tmp_path):
    demo = create_app(make_engine(), speech=make_models(tmp_path))
    holder, page, states = loaded_page(demo)
    session, links = page[states[VoiceSession]], demo.voice_links
    session.frame = np.zeros((8, 8, 3), np.uint8)
    session.listen(make_models(tmp_path).turn_taker())
    token, client = links.issue(session), served(links)
    with opened(client, token) as ws:
        silence_then_wait(ws, 1, lambda: links.open_lines == 1)
        close_page(holder, page)
        ws.send_bytes(pcm(np.zeros(640)))  # the line closes at its next frame
        assert closed_with(ws) == REPLACED and links.open_lines == 0
    with opened(client, token) as ws:  # the token opens nothing any more
        assert closed_with(ws) == UNKNOWN
    assert states[VoiceSession] not in page.state_data


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
    with pytest.raises(gr.Error, match=r"9000x9000 = 81,000,000 pixels, above the limit of 64,000,000"):
        component.preprocess(ImageData(path=str(huge), orig_name="huge.png"))
    assert decoded == []  # refused from its header (was: decoded)
    assert component.preprocess(ImageData(path=str(fine), orig_name="fine.png")).shape == (480, 640, 3)
    assert set(decoded) == {(640, 480)}  # (the spy sees a decode)


def test_the_apps_webcams_decode_at_most_max_frame_decodes_frames_at_once(tmp_path, monkeypatch):
    """Each webcam's endpoint takes any file from an API caller and Gradio runs up to 40 decodes at once: 40 frames
    near the 64-megapixel limit (0.4-1.6 GB each while decoded) at once could take the machine's memory."""
    import ui.inputs

    demo = create_app(make_engine(), speech=make_models(tmp_path))  # the default: 2 at once, for all three
    cameras = [b for b in demo.blocks.values() if getattr(b, "elem_id", None) in
               ("snapshot-camera", "live-camera", "voice-camera")]
    Image.new("RGB", (64, 48)).save(tmp_path / "frame.png")
    running, most, lock = [0], [0], threading.Lock()

    def slow_decode(source, max_pixels):
        with lock:
            running[0] += 1
            most[0] = max(most[0], running[0])
        time.sleep(0.05)
        with lock:
            running[0] -= 1
        return Image.new("RGB", (4, 4))

    monkeypatch.setattr(ui.inputs, "load_image", slow_decode)
    threads = [threading.Thread(target=camera.preprocess, args=(ImageData(path=str(tmp_path / "frame.png")),))
               for camera in cameras for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    assert len(cameras) == 3 and most[0] == 2, most  # was 12: every call decoded at once


def test_a_camera_endpoint_decodes_a_file_as_the_engine_does(tmp_path, monkeypatch):
    """Gradio's own decode gave an animated GIF's palette indices (the model saw black), clipped a 16-bit image
    to white, and handed an EPS named .png to Ghostscript; the Image tab and the API decode each the same way."""
    from PIL import EpsImagePlugin

    engine = Engine(FakeVision(), FakeLM(b"x"), EngineConfig(vision_path="v.onnx", llm_path="m.gguf",
                                                              resolution=128, threads=1))
    camera = next(b for b in create_app(engine).blocks.values() if getattr(b, "elem_id", None) == "snapshot-camera")
    red = [Image.new("RGB", (16, 16), (255, 0, 0)), Image.new("RGB", (16, 16), (0, 0, 255))]
    red[0].save(tmp_path / "red.gif", save_all=True, append_images=red[1:], duration=100)
    Image.fromarray(np.full((8, 8), 20000, np.uint16)).save(tmp_path / "grey16.png")
    (tmp_path / "photo.png").write_bytes(b"%!PS-Adobe-3.0 EPSF-3.0\n%%BoundingBox: 0 0 10 10\n")
    assert camera.preprocess(ImageData(path=str(tmp_path / "red.gif"))).shape == (16, 16, 3)
    assert camera.preprocess(ImageData(path=str(tmp_path / "red.gif")))[0, 0].tolist() == [255, 0, 0]
    assert camera.preprocess(ImageData(path=str(tmp_path / "grey16.png")))[0, 0].tolist() == [78, 78, 78]
    monkeypatch.setattr(EpsImagePlugin, "Ghostscript", lambda *a, **k: pytest.fail("ran Ghostscript"))
    monkeypatch.setattr(EpsImagePlugin, "has_ghostscript", lambda: True)
    with pytest.raises(gr.Error, match="not an image PIL can read"):
        camera.preprocess(ImageData(path=str(tmp_path / "photo.png")))


def test_a_camera_frame_may_come_as_a_data_url():
    """A frame sent as a base64 data URL is decoded as a file is; one that is not base64 is refused, saying so."""
    camera = bounded_frames(gr.Image(type="numpy"), threading.Semaphore(1))
    buf = io.BytesIO()
    Image.new("RGB", (4, 2), (255, 0, 0)).save(buf, "PNG")
    frame = camera.preprocess(ImageData(url="data:image/png;base64," + base64.b64encode(buf.getvalue()).decode()))
    assert frame.shape == (2, 4, 3) and frame[0, 0].tolist() == [255, 0, 0]
    with pytest.raises(gr.Error, match="the frame's data URL is not base64"):
        camera.preprocess(ImageData(url="data:image/png;base64,@@@"))
