"""Two people at once in two browser contexts: answers and histories never mix; a closed tab frees the engine."""

import pytest

from tests.browser.pages import ask, chat, metrics, screenshot, upload, wait_answer, wait_until

pytestmark = pytest.mark.browser


def test_two_people_at_once_never_see_each_others_answers(new_page, app_server, sample_images):
    app_server.lm.delay, app_server.lm.endless = 0.06, True  # ~2 s per answer: the two overlap in time
    alice, bob = new_page(), new_page()
    upload(alice, sample_images[0])
    upload(bob, sample_images[1])
    ask(alice, "alpha: what is round?")
    ask(bob, "bravo: what is green?")  # waits in line behind alice's answer, then streams
    wait_until(lambda: "queue" in bob.locator("#image-chat").inner_text(), 3, what="bob to see his place in line")
    screenshot(bob, "image-tab-waiting")
    wait_answer(alice, 1)
    wait_answer(bob, 1)
    assert chat(alice, "user") == ["alpha: what is round?"]
    assert chat(bob, "user") == ["bravo: what is green?"]
    assert app_server.lm.max_active == 1

    ask(alice, "alpha again?")
    wait_answer(alice, 2)
    assert chat(alice, "user") == ["alpha: what is round?", "alpha again?"]
    assert chat(bob, "user") == ["bravo: what is green?"] and len(chat(bob, "bot")) == 1
    answers = chat(alice, "bot") + chat(bob, "bot")
    assert len(set(answers)) == 3, "an answer appeared in both pages"
    assert "tokens" in metrics(bob)


def test_closing_a_tab_mid_answer_frees_the_engine(new_page, app_server, sample_images, browser):
    app_server.lm.delay, app_server.lm.endless = 0.1, True  # 32 tokens: over 3 s unless the tab's close stops it
    page = new_page()
    upload(page, sample_images[0])
    ask(page, "A long answer, please.")
    wait_until(lambda: app_server.engine.busy and any(chat(page, "bot")), what="the answer to stream")
    page.context.close()
    wait_until(lambda: not app_server.engine.busy, 3, what="the engine to be freed by the closed tab")
    assert app_server.lm.spans[-1][2] < 30
