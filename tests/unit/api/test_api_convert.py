"""The API's pure parts: OpenAI messages -> engine request, data URLs, errors, bind checks, client encoding."""

import base64
import io

import numpy as np
import pytest
from PIL import Image

from fastvlm import GenerationOptions, InputError, Request, Stats, Turn
from fastvlm.api import ApiError, ApiSettings, UnsafeBindError, check_bind, convert, images, is_loopback
from fastvlm.api.schema import ChatCompletionRequest, Completion, finish_reason, usage
from fastvlm.remote import RemoteEngine, image_data_url

PNG = base64.b64encode(b"\x89PNG...").decode()
URL = f"data:image/png;base64,{PNG}"


def image_part(url=URL):
    return {"type": "image_url", "image_url": {"url": url}}


def body(messages, **kw):
    return ChatCompletionRequest.model_validate({"messages": messages, **kw})


def api_error(fn, *args) -> ApiError:
    with pytest.raises(ApiError) as e:
        fn(*args)
    return e.value


def test_one_user_message_with_image_and_text():
    b = body([{"role": "system", "content": "Be terse."},
              {"role": "user", "content": [image_part(), {"type": "text", "text": "What is it?"}]}])
    url, question, history, _, _ = convert.conversation(b)
    assert (url, question, history) == (URL, "What is it?", ())


def test_later_messages_become_history_and_runs_of_one_role_are_joined():
    b = body([
        {"role": "user", "content": [{"type": "text", "text": "Hi."}, image_part()]},
        {"role": "assistant", "content": "A cat."},
        {"role": "user", "content": "Colour?"},
        {"role": "user", "content": [{"type": "text", "text": "Be brief."}]},
        {"role": "assistant", "content": None},
        {"role": "developer", "content": "ignored"},
        {"role": "user", "content": "And now?"},
    ])
    _, question, history, _, _ = convert.conversation(b)
    assert question == "And now?"
    assert history == (Turn("Hi.", "A cat."), Turn("Colour?\nBe brief.", ""))


def test_continue_final_message_takes_the_assistants_last_words_as_the_answer_so_far():
    messages = [{"role": "user", "content": [image_part(), {"type": "text", "text": "What is it?"}]},
                {"role": "assistant", "content": "It is a "}]
    url, question, history, so_far, _ = convert.conversation(body(messages, continue_final_message=True))
    assert (question, history, so_far) == ("What is it?", (), "It is a ")  # the trailing space kept
    assert convert.chat_input(body(messages, continue_final_message=True)).answer_so_far == "It is a "
    assert "end with a user message" in api_error(convert.conversation, body(messages)).message  # not asked for
    e = api_error(convert.conversation, body(messages[:1], continue_final_message=True))
    assert "assistant's answer so far" in e.message


def test_the_image_may_come_in_a_later_user_message_and_stays_in_the_last_one():
    """Sent with the question after earlier turns, the image is the question's (`Request.image_with_question`);
    sent in a message between, it goes in the first turn, as before."""
    turn = [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello"}]
    last = [{"role": "user", "content": [image_part("data:image/jpeg;base64,AAAA"), {"type": "text", "text": "?"}]}]
    url, _, history, _, with_question = convert.conversation(body(turn + last))
    assert url == "data:image/jpeg;base64,AAAA" and history == (Turn("Hi", "Hello"),) and with_question
    assert convert.chat_input(body(turn + last)).image_with_question
    between = [*last, {"role": "assistant", "content": "A cat."}, {"role": "user", "content": "Why?"}]
    assert convert.conversation(body(turn + between))[2:] == ((Turn("Hi", "Hello"), Turn("?", "A cat.")), "", False)
    first = [{"role": "user", "content": [image_part(), {"type": "text", "text": "Hi"}]}, *turn[1:],
             {"role": "user", "content": "?"}]
    assert convert.conversation(body(first))[4] is False
    assert convert.conversation(body(last))[4] is False  # no earlier turns: the same prompt either way


@pytest.mark.parametrize("messages, code, param", [
    ([{"role": "user", "content": "no image"}], "image_required", "messages"),
    ([{"role": "user", "content": [image_part(), image_part()]}], "too_many_images", "messages[0].content[1]"),
    ([{"role": "user", "content": [image_part()]}, {"role": "assistant", "content": "x"},
      {"role": "user", "content": [image_part()]}], "too_many_images", "messages[2].content[0]"),
    ([{"role": "user", "content": [image_part()]}, {"role": "assistant", "content": [image_part()]}],
     "invalid_request", "messages[1].content[0]"),
    ([{"role": "user", "content": [image_part(), {"type": "input_audio", "input_audio": {}}]}],
     "unsupported_content", "messages[0].content[1].type"),
    ([{"role": "user", "content": [image_part()]}, {"role": "tool", "content": "42"}], "invalid_request",
     "messages[1].role"),
    ([{"role": "user", "content": [image_part()]}, {"role": "assistant", "content": "x"}], "invalid_request",
     "messages"),
    ([{"role": "assistant", "content": "x"}, {"role": "user", "content": [image_part()]}], "invalid_request",
     "messages"),
    ([{"role": "user", "content": [{"type": "image_url", "image_url": ""}]}], "invalid_request",
     "messages[0].content[0].image_url"),
])
def test_unusable_conversations_are_400s_naming_the_param(messages, code, param):
    e = api_error(convert.conversation, body(messages))
    assert (e.status, e.code, e.param) == (400, code, param)
    assert e.body()["error"]["type"] == "invalid_request_error"


def test_options_map_onto_generation_options():
    msgs = [{"role": "user", "content": [image_part()]}]
    assert convert.options(body(msgs)) == GenerationOptions()  # the engine's defaults: greedy
    o = convert.options(body(msgs, max_tokens=5, max_completion_tokens=7, temperature=0.5, top_p=0.9, seed=3,
                             stop="END", top_k=0, repeat_penalty=1.1, frequency_penalty=0.3, user="x"))
    assert o == GenerationOptions(max_new_tokens=7, temperature=0.5, top_p=0.9, seed=3, stop=("END",), top_k=0,
                                  repeat_penalty=1.1)
    assert convert.options(body(msgs, stop=["a", "", "b"])).stop == ("a", "b")
    assert api_error(convert.options, body(msgs, n=2)).param == "n"
    assert convert.resolution(512) == 512
    assert api_error(convert.resolution, 500).status == 400


@pytest.mark.parametrize("url, fragment", [
    ("data:text/plain;base64,aGVsbG8=", "text/plain, not an image"),
    ("data:image/png,rawbytes", "not base64"),
    ("data:image/png;base64,@@@", "invalid base64"),
    ("data:image/png;base64,", "empty"),
    ("data:nonsense", "malformed"),
])
def test_bad_data_urls_are_400s(url, fragment):
    e = api_error(images.decode_data_url, url)
    assert e.status == 400 and fragment in e.message and "data:image/jpeg;base64" in e.message


def test_data_url_decoding_ignores_whitespace_and_case():
    assert images.decode_data_url(f"data:IMAGE/PNG;BASE64,{PNG[:4]}\n{PNG[4:]}") == b"\x89PNG..."


@pytest.mark.anyio
@pytest.mark.parametrize("url, code", [("https://example.com/cat.jpg", "remote_image_url_refused"),
                                       ("file:///etc/passwd", "invalid_image_url")])
async def test_remote_and_other_urls_are_refused_by_default(url, code):
    with pytest.raises(ApiError) as e:
        await images.image_bytes(url, ApiSettings())
    assert (e.value.status, e.value.code) == (400, code)


def test_stop_reasons_map_to_openai_finish_reasons():
    assert {r: finish_reason(r) for r in ("end_of_turn", "end_of_text", "stop_string", "max_tokens",
                                          "context_full")} == {"end_of_turn": "stop", "end_of_text": "stop",
                                                               "stop_string": "stop", "max_tokens": "length",
                                                               "context_full": "length"}
    stats = Stats(prompt_tokens=40, new_tokens=5, stop_reason="max_tokens")
    assert usage(stats) == {"prompt_tokens": 40, "completion_tokens": 5, "total_tokens": 45}
    msg = Completion("m").message("hi", stats, [])
    assert msg["choices"][0] == {"index": 0, "message": {"role": "assistant", "content": "hi"}, "logprobs": None,
                                 "finish_reason": "length"}
    assert msg["object"] == "chat.completion" and msg["id"].startswith("chatcmpl-")


@pytest.mark.parametrize("host, loopback", [("127.0.0.1", True), ("127.1.2.3", True), ("::1", True),
                                            ("[::1]", True), ("localhost", True), ("::ffff:127.0.0.1", True),
                                            ("0.0.0.0", False),
                                            ("::", False), ("192.168.1.5", False), ("", False), (None, False),
                                            ("myhost.lan", False)])
def test_is_loopback(host, loopback):
    assert is_loopback(host) is loopback


def test_check_bind_needs_a_key_off_loopback(caplog):
    check_bind("127.0.0.1", ApiSettings())
    with pytest.raises(UnsafeBindError, match="FASTVLM_API_KEY"):
        check_bind("0.0.0.0", ApiSettings())
    with pytest.raises(UnsafeBindError, match="share link"):
        check_bind("127.0.0.1", ApiSettings(), share=True)
    check_bind("0.0.0.0", ApiSettings(api_key="k"))
    check_bind("0.0.0.0", ApiSettings(allow_unauthenticated_remote=True))
    assert "WITHOUT an API key" in caplog.text
    with pytest.raises(ValueError):
        ApiSettings(api_key=" ")


def png_bytes(a):
    buf = io.BytesIO()
    Image.fromarray(a).save(buf, "PNG")
    return buf.getvalue()


def test_client_encodes_files_as_they_are_and_pixels_losslessly(tmp_path):
    a = np.random.default_rng(0).integers(0, 256, (20, 30, 3), dtype=np.uint8)
    data = png_bytes(a)
    (tmp_path / "x.png").write_bytes(data)
    assert image_data_url(data) == image_data_url(tmp_path / "x.png") == \
        f"data:image/png;base64,{base64.b64encode(data).decode()}"
    url = image_data_url(a)
    decoded = np.asarray(Image.open(io.BytesIO(base64.b64decode(url.split(",", 1)[1]))))
    assert np.array_equal(decoded, a)
    assert image_data_url(a, "JPEG").startswith("data:image/jpeg;base64,")
    with pytest.raises(InputError, match="not an image"):
        image_data_url(b"not an image")
    with pytest.raises(InputError, match="no file"):
        image_data_url(tmp_path / "missing.png")


def test_client_sends_history_as_messages_with_the_image_first():
    remote = RemoteEngine("http://127.0.0.1:9/v1/", model="fastvlm")
    assert remote.base_url == "http://127.0.0.1:9"
    a = np.zeros((8, 8, 3), np.uint8)
    req = Request(a, "Now?", (Turn("What?", "A square."),), GenerationOptions(max_new_tokens=9, stop=("x",)))
    b = remote._body(req)
    remote.close()
    assert [m["role"] for m in b["messages"]] == ["user", "assistant", "user"]
    assert b["messages"][0]["content"][0]["type"] == "image_url"
    assert b["messages"][0]["content"][1] == {"type": "text", "text": "What?"}
    assert b["messages"][2]["content"] == [{"type": "text", "text": "Now?"}]
    assert (b["max_tokens"], b["stop"], b["temperature"], b["stream"], b["model"]) == (9, ["x"], 0.0, True, "fastvlm")
    assert "seed" not in b and "resolution" not in b
    assert ChatCompletionRequest.model_validate(b)  # what the client sends, the server reads


@pytest.mark.parametrize("with_question", [False, True])
def test_the_client_sends_the_image_where_the_request_has_it_and_the_server_reads_it_back(with_question):
    remote = RemoteEngine("http://127.0.0.1:9", model="fastvlm")
    history = (Turn("What?", "A square."), Turn("Colour?", "Red."))
    b = remote._body(Request(np.zeros((8, 8, 3), np.uint8), "Now?", history, image_with_question=with_question))
    remote.close()
    holds_image = [any(part["type"] == "image_url" for part in m["content"]) for m in b["messages"] if
                   m["role"] == "user"]
    assert holds_image == ([False, False, True] if with_question else [True, False, False])
    _, question, read, _, read_with_question = convert.conversation(ChatCompletionRequest.model_validate(b))
    assert (question, read, read_with_question) == ("Now?", history, with_question)
