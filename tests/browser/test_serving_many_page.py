"""Serving many people (issue #19): through deploy/launch.py's nginx in front of 2 replicas (tiny models, page
protection on), a person in Chromium logs in and asks about an image while the `openai` client and an MCP agent
ask at the same time; everyone gets answers, and the API's requests are spread over both replicas."""

from __future__ import annotations

import asyncio
import threading

import openai
import pytest

from tests import mcp_client
from tests.browser.pages import ask, chat, upload, wait_answer
from tests.deploy_stack import KEY, chat as chat_messages
from tests.deploy_stack import png_url, running

pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def served(tiny_models, tmp_path_factory):
    with running(tiny_models, tmp_path_factory.mktemp("stack"), app_args=("--protect-page",)) as s:
        yield s


def test_a_page_an_openai_client_and_an_mcp_agent_at_once_through_the_proxy(browser, served, sample_images):
    answers: dict[str, list[str]] = {"openai": [], "mcp": []}
    errors: list[BaseException] = []

    def openai_client():
        with openai.OpenAI(base_url=served.url + "/v1", api_key=KEY, max_retries=2, timeout=60) as c:
            for i in range(6):
                r = c.chat.completions.create(model="fastvlm", messages=chat_messages(seed=i), max_tokens=24)
                answers["openai"].append(r.choices[0].message.content)

    def mcp_agent():
        async def work(session):
            for i in range(4):
                result = await session.call_tool("ask_image", {"image": png_url(i), "question": "What is it?"})
                assert not result.isError, mcp_client.text(result)
                answers["mcp"].append(mcp_client.text(result))
                await asyncio.sleep(0.05)

        mcp_client.run(served.url + "/mcp", work, KEY)

    def guarded(fn):
        def run():
            try:
                fn()
            except BaseException as e:  # reported below, in the test's thread
                errors.append(e)
        return run

    threads = [threading.Thread(target=guarded(f)) for f in (openai_client, mcp_agent)]
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    try:
        page = context.new_page()
        page.set_default_timeout(30_000)
        page.goto(served.url)
        page.locator("input[type=password]").wait_for()  # Gradio's login: any user name, the key as password
        page.locator("input[type=text]").first.fill("someone")
        page.locator("input[type=password]").fill(KEY)
        for t in threads:
            t.start()
        page.get_by_role("button", name="Login").click()
        page.locator("#image-input").wait_for()
        upload(page, sample_images[0])
        ask(page, "What colour is the circle?")
        wait_answer(page, 1, timeout=60)
        assert chat(page, "user") == ["What colour is the circle?"] and chat(page, "bot")[0]
    finally:
        for t in threads:
            t.join(120)
        context.close()
    assert not errors, errors
    assert not any(t.is_alive() for t in threads)
    assert len(answers["openai"]) == 6 and len(answers["mcp"]) == 4
    api_lines = [line for line in served.access_log() if "/v1/chat" in line or "/mcp" in line]
    served_by = {u.split(", ")[-1] for u in served.upstreams(api_lines)}
    assert served_by == {f"127.0.0.1:{p}" for p in served.ports}, served_by  # both replicas answered
