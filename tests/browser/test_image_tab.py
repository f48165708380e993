"""The Image tab in Chromium: upload, streamed answer, metrics, follow-up, errors in the page, Stop."""

import itertools
import time

import pytest

from tests.browser.pages import (
    FINAL_METRICS,
    ask,
    chat,
    close_toasts,
    metrics,
    screenshot,
    upload,
    wait_answer,
    wait_settled,
    wait_toast,
    wait_until,
)

pytestmark = pytest.mark.browser


def test_upload_ask_see_it_stream_with_metrics_then_follow_up(new_page, app_server, sample_images):
    app_server.lm.delay, app_server.lm.endless = 0.04, True  # 32 tokens over ~1.3 s: visibly streamed
    page = new_page()
    upload(page, sample_images[0])
    ask(page, "What colour is the circle?")
    seen = []

    def finished():
        bots = chat(page, "bot")
        if bots and bots[-1] and (not seen or seen[-1] != bots[-1]):
            seen.append(bots[-1])
        return "tokens" in metrics(page)

    wait_until(finished, 20, every=0.03, what="the first answer")
    assert len(seen) >= 3, f"the answer arrived in {len(seen)} piece(s), not streamed"
    first = wait_answer(page, 1)
    assert first.group(3) == "32"  # (encode may read "cached": the upload was prepared while the question was typed)
    assert chat(page, "user") == ["What colour is the circle?"]
    # every piece seen grows into the final answer (the last piece may have been read just before it painted)
    assert all(b.startswith(a.rstrip()) for a, b in itertools.pairwise(seen + chat(page, "bot")[:1]))

    page.get_by_role("button", name="Read all the text.").click()  # a preset fills the question box
    box = page.locator("#image-question textarea")
    wait_until(lambda: box.input_value() == "Read all the text.", 5, what="the preset in the question box")
    box.press("Enter")
    follow_up = wait_answer(page, 2)
    assert chat(page, "user") == ["What colour is the circle?", "Read all the text."]
    assert follow_up.group(1) == "cached" and follow_up.group(2)  # image embedding and KV cache reused
    assert page.locator("#image-question textarea").input_value() == ""
    screenshot(page, "image-tab")


def test_mistakes_are_told_in_the_page_never_in_the_answer(new_page, app_server, sample_images, tmp_path):
    page = new_page()
    page.locator("#image-submit").click()
    wait_toast(page, "Upload an image first")
    assert chat(page, "user") == [] and chat(page, "bot") == []
    close_toasts(page)

    broken = tmp_path / "holiday.png"
    broken.write_bytes(b"\x89PNG\r\n\x1a\n this is not really a picture")
    page.locator("#image-input input[type=file]").set_input_files(str(broken))
    wait_toast(page, "not an image that can be read")
    page.wait_for_timeout(400)  # let the toast finish sliding in
    screenshot(page, "image-tab-error")
    close_toasts(page)

    app_server.lm.delay, app_server.lm.endless = 0.1, True
    page.locator("#image-input button[aria-label='Remove Image']").click()
    upload(page, sample_images[1])
    ask(page, "")  # an empty question asks the default
    wait_until(lambda: any(chat(page, "bot")), what="the answer to start")
    page.locator("#image-submit").click()  # a second click while streaming
    wait_toast(page, "Still answering")
    assert chat(page, "user") == ["Describe the image."]
    page.locator("#image-stop").click()
    assert all("Still answering" not in text and "not an image" not in text for text in chat(page, "bot"))


def test_stop_mid_answer_frees_the_engine_and_the_next_question_starts_at_once(new_page, app_server, sample_images):
    app_server.lm.delay, app_server.lm.endless = 0.1, True  # 32 tokens: over 3 s if not stopped
    page = new_page()
    upload(page, sample_images[0])
    ask(page, "Tell me everything.")
    wait_until(lambda: len(chat(page, "bot")[-1:][0] if chat(page, "bot") else "") > 3, what="some answer text")
    page.locator("#image-stop").click()
    wait_until(lambda: not app_server.engine.busy, 2, what="the engine to be freed")
    stopped, stopped_run = chat(page, "bot")[0], app_server.lm.spans[-1]
    t = time.monotonic()
    ask(page, "Now something else?")
    wait_until(lambda: len(chat(page, "bot")) == 2 and chat(page, "bot")[1].strip(), 5, every=0.02,
               what="the next answer to start")
    started = time.monotonic() - t
    assert started < 2.0, f"the next answer took {started:.1f} s to start after Stop"
    assert stopped_run[2] < 20, f"{stopped_run[2]} tokens decoded: Stop did not stop decoding"
    assert chat(page, "bot")[0].startswith(stopped)  # kept as shown (plus a token that was on its way)
    assert chat(page, "user") == ["Tell me everything.", "Now something else?"]
    page.locator("#image-stop").click()


def test_a_question_asked_while_the_stopped_answer_winds_down_is_answered(new_page, app_server, sample_images):
    """Stop, then Submit at once, while the stopped answer still finishes its token (0.6 s each here): the page
    must send the new question (not drop it silently: the old answer is still pending there), and the stopped
    turn stays in the chat before it."""
    app_server.lm.delay, app_server.lm.endless = 0.6, True
    page = new_page()
    upload(page, sample_images[0])
    ask(page, "Tell me everything.")
    stopped = wait_until(lambda: "".join(chat(page, "bot")), what="the first answer to start")
    page.locator("#image-stop").click()
    ask(page, "Now something else?")
    wait_until(lambda: len(chat(page, "bot")) == 2 and chat(page, "bot")[1].strip(), 8,
               what="the question asked right after Stop to be answered")
    assert chat(page, "user") == ["Tell me everything.", "Now something else?"]
    assert chat(page, "bot")[0].startswith(stopped)
    page.locator("#image-stop").click()


def test_a_new_image_mid_answer_stops_it_and_the_next_question_gets_in(new_page, app_server, sample_images):
    """Replacing the image starts a new conversation: the old answer stops (not 'Still answering' on the next
    Submit), and it does not come back into the new chat."""
    app_server.lm.delay, app_server.lm.endless = 0.1, True  # 32 tokens: over 3 s if not stopped
    page = new_page()
    upload(page, sample_images[0])
    ask(page, "Tell me everything.")
    wait_until(lambda: any(chat(page, "bot")), what="the first answer to start")
    upload(page, sample_images[1])
    ask(page, "And this one?")
    wait_until(lambda: chat(page, "user") == ["And this one?"] and any(chat(page, "bot")), 5,
               what="the new image's answer to start")
    assert "Still answering" not in " ".join(page.locator(".toast-body").all_inner_texts())
    assert app_server.lm.spans[-1][2] < 20, f"{app_server.lm.spans[-1][2]} tokens: the old answer ran on"
    page.locator("#image-stop").click()


def test_an_image_replaced_while_the_first_is_prepared_is_prepared_too(new_page, app_server, sample_images):
    """The second upload's prepare is asked for while the first's still holds the engine: the page must not drop
    it, nor the engine skip it (its question would then pay the whole encode and prefill after Submit)."""
    app_server.lm.prefill_delay = 1.5
    page = new_page()
    upload(page, sample_images[0])
    wait_until(lambda: app_server.engine.busy, 5, every=0.01, what="the first image's prepare")
    upload(page, sample_images[1])
    wait_settled(app_server.engine)  # both prepares over
    app_server.lm.prefill_delay = 0.0
    ask(page, "And this one?")
    final = wait_until(lambda: FINAL_METRICS.search(metrics(page)), what="the answer's final metrics")
    assert final.group(1) == "cached", f"the replacing image was not prepared: {metrics(page)!r}"

