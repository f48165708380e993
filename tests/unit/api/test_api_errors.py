"""Every failure in OpenAI's error shape, called directly: the `type` for each status, what each kind of exception
becomes, how a validation error names its parameter, the operator's log line, and an error inside a stream."""

from __future__ import annotations

import json
import logging

import pytest
from fastapi.exceptions import RequestValidationError
from starlette.exceptions import HTTPException
from starlette.formparsers import MultiPartException

from fastvlm.api.errors import ApiError, from_validation, log_refusal, sse_error, to_api_error
from fastvlm.engine.events import Busy, InputError


@pytest.mark.parametrize("status, kind", [
    (400, "invalid_request_error"), (401, "authentication_error"), (403, "permission_error"),
    (404, "invalid_request_error"), (413, "invalid_request_error"), (422, "invalid_request_error"),
    (503, "server_busy"), (500, "server_error"), (405, "server_error"), (402, "server_error"),
])
def test_each_status_has_openais_error_type(status, kind):
    err = ApiError(status, "what to do", param="p", code="c")
    assert err.body() == {"error": {"message": "what to do", "type": kind, "param": "p", "code": "c"}}
    response = err.response()
    assert response.status_code == status and json.loads(response.body) == err.body()


def test_each_kind_of_exception_becomes_its_status_and_code(caplog):
    mine = ApiError(413, "too big")
    assert to_api_error(mine, 5) is mine
    busy = to_api_error(Busy("the engine is busy"), 7)
    assert (busy.status, busy.code, busy.headers, busy.message) == (503, "engine_busy", {"Retry-After": "7"},
                                                                    "the engine is busy")
    bad = to_api_error(InputError("the image is 0×0"), 5)
    assert (bad.status, bad.code, bad.message) == (400, "invalid_input", "the image is 0×0")
    form = to_api_error(MultiPartException("no boundary"), 5)
    assert (form.status, form.code, form.message) == (400, "invalid_multipart", "the multipart body is malformed "
                                                                                 "(no boundary)")
    http = to_api_error(HTTPException(405, "Method Not Allowed", headers={"Allow": "POST"}), 5)
    assert (http.status, http.message, http.headers) == (405, "Method Not Allowed", {"Allow": "POST"})
    assert to_api_error(HTTPException(404), 5).headers == {}
    with caplog.at_level(logging.ERROR, logger="fastvlm.api.errors"):
        try:  # as every caller does: inside the handler, so the traceback is logged
            raise ValueError("a bug, not the client's")  # a plain ValueError is not an InputError
        except ValueError as e:
            bug = to_api_error(e, 5)
    assert (bug.status, bug.code) == (500, "internal_error") and "(ValueError)" in bug.message
    assert "a bug" not in bug.message and "ValueError: a bug, not the client's" in caplog.text  # the log has it


def validation(*errors: dict) -> ApiError:
    return from_validation(RequestValidationError(list(errors)))


def test_malformed_json_is_a_400_whatever_else_is_wrong():
    err = validation({"type": "missing", "loc": ("body", "model"), "msg": "Field required"},
                     {"type": "json_invalid", "loc": ("body", 12), "msg": "JSON decode error"})
    assert (err.status, err.code) == (400, "json_invalid")


def test_too_many_messages_is_a_400_that_says_how_many():
    err = validation({"type": "string_type", "loc": ("body", "model"), "msg": "Input should be a valid string"},
                     {"type": "too_long", "loc": ("body", "messages"), "msg": "List should have at most 64 items",
                      "ctx": {"max_length": 64, "actual_length": 70}})
    assert (err.status, err.code, err.param) == (400, "too_many_messages", "messages")
    assert err.message.startswith("70 messages are more than the 64 this server accepts")


def test_another_limit_broken_is_named_before_other_problems():
    err = validation({"type": "string_type", "loc": ("body", "stop", "str"), "msg": "Input should be a valid string"},
                     {"type": "too_long", "loc": ("body", "stop", "list[str]"), "msg": "List should have at most 4"})
    assert (err.status, err.code, err.param) == (422, "invalid_value", "stop")
    assert err.message == "stop: List should have at most 4 (and 1 more problem(s))"


@pytest.mark.parametrize("loc, param", [
    (("body", "messages", 0, "content", "list[ContentPart]", 2, "image_url", "url"),
     "messages.0.content.2.image_url.url"),
    (("body", "max_tokens", "int"), "max_tokens"),
    (("body", "temperature", "float"), "temperature"),
    (("body", "stop", "constrained-str"), "stop"),
    (("query", "limit"), "query.limit"),
])
def test_the_param_is_the_fields_path_without_the_union_member_tried(loc, param):
    err = validation({"type": "value_error", "loc": loc, "msg": "Value error, no"})
    assert (err.status, err.param, err.message) == (422, param, f"{param}: Value error, no")


def test_an_error_without_a_place_says_what_it_can():
    err = validation({"type": "model_type", "loc": ("body",), "msg": "Input should be an object"})
    assert (err.param, err.message) == (None, "Input should be an object")
    assert validation().message == "invalid request body"  # no detail at all


@pytest.mark.parametrize("status, level", [(500, logging.ERROR), (503, logging.WARNING), (413, logging.WARNING),
                                           (401, logging.WARNING)])
def test_the_operators_line_is_an_error_only_for_the_servers_own_failures(caplog, status, level):
    with caplog.at_level(logging.INFO, logger="fastvlm.api.errors"):
        log_refusal("10.0.0.7", "POST", "/v1/chat/completions", ApiError(status, "the client's words", code=None))
    (record,) = caplog.records
    assert record.levelno == level and "the client's words" not in record.getMessage()
    kind = ApiError(status, "").body()["error"]["type"]
    assert record.getMessage() == f"refused client=10.0.0.7 POST /v1/chat/completions status={status} reason={kind}"


def test_an_error_inside_a_stream_is_one_data_event_in_openais_shape():
    event = sse_error(InputError("the image is 0×0"))
    assert event.startswith("data: ") and event.endswith("\n\n")
    assert json.loads(event.removeprefix("data: "))["error"]["code"] == "invalid_input"
