"""A person's session states are freed once their page has been closed for Gradio's grace period: the running
answer stops (the delete callbacks) and the Live tab's last frame goes (Gradio's own state holder, fakes)."""

import asyncio

import gradio as gr
import numpy as np
from gradio.state_holder import StateHolder

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
