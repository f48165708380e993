"""llama.cpp decodes on one thread of the language model's own, whichever thread asks for an answer (the app
asks from Gradio's workers, read-ahead and prepare threads): one OpenMP team, not one per asking thread."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from fastvlm import GenerationOptions, Request
from fastvlm.engine.engine import Engine

IMAGE = np.random.default_rng(7).integers(0, 256, (64, 96, 3), dtype=np.uint8)
GREEDY = GenerationOptions(max_new_tokens=6, temperature=0.0)


class RecordingLlama:
    """The llama_cpp module, with the threads that called `llama_decode` recorded."""

    def __init__(self, module, seen: list[str]) -> None:
        self._module, self._seen = module, seen

    def __getattr__(self, name: str):
        attr = getattr(self._module, name)
        if name != "llama_decode":
            return attr

        def decode(*args):
            self._seen.append(threading.current_thread().name)
            return attr(*args)

        return decode


def test_answers_asked_from_three_threads_decode_on_one_thread_of_the_model(tiny_config):
    engine = Engine.load(tiny_config)
    seen: list[str] = []
    engine.lm._ll = RecordingLlama(engine.lm._ll, seen)
    try:
        callers, answers = [], []

        def ask(question: str) -> None:
            callers.append(threading.current_thread().name)
            answers.append(engine.answer(Request(IMAGE, question, options=GREEDY)).text)

        ask("What is it?")
        other = threading.Thread(target=ask, args=("What colour is it?",), name="asker")
        other.start()
        other.join()
        with ThreadPoolExecutor(1, thread_name_prefix="pool-asker") as pool:
            pool.submit(ask, "Where is it?").result()
        assert len(answers) == 3 and len(set(callers)) == 3
        assert seen and set(seen) == {seen[0]}, f"llama_decode ran on {sorted(set(seen))}"
        assert seen[0] not in callers
    finally:
        engine.close()
