"""The tools' schemas as an agent's client checks them (JSON Schema, by `jsonschema`), the message for a call
without an image, and the structured result's rounding: pure, no server."""

from __future__ import annotations

import jsonschema
import pytest

from fastvlm.engine.events import Result, Stats
from fastvlm.mcp import McpSettings, ToolError
from fastvlm.mcp.tools import OUTPUT_SCHEMA, Limits, parse_call, structured_result, tool_specs

SPECS = {s["name"]: s for s in tool_specs(Limits(max_body_bytes=20_000_000, max_image_pixels=64_000_000,
                                                 queue_wait_s=30, resolution=1024))}
IMAGE = "data:image/png;base64,iVBORw0KGgo="


def valid(tool: str, arguments: dict) -> bool:
    try:
        jsonschema.validate(arguments, SPECS[tool]["inputSchema"])
    except jsonschema.ValidationError:
        return False
    return True


@pytest.mark.parametrize("resolution, ok", [(64, True), (512, True), (1024, True), (0, False), (100, False),
                                            (1088, False), (65, False), ("512", False)])
def test_the_schema_takes_the_resolutions_the_engine_serves(resolution, ok):
    for tool, arguments in (("ask_image", {"image": IMAGE, "question": "q"}), ("describe_image", {"image": IMAGE})):
        assert valid(tool, {**arguments, "resolution": resolution}) is ok
        assert valid(tool, arguments)  # the resolution may be left out


def test_the_schema_refuses_arguments_it_does_not_know_and_needs_its_own():
    assert not valid("ask_image", {"image": IMAGE, "question": "q", "temperature": 0.7})
    assert not valid("describe_image", {"image": IMAGE, "question": "q"})  # describe takes no question
    assert not valid("ask_image", {"image": IMAGE}) and not valid("ask_image", {"image": IMAGE, "question": ""})
    assert not valid("describe_image", {})


def test_a_call_without_an_image_is_told_how_to_send_one():
    with pytest.raises(ToolError) as caught:
        parse_call("describe_image", {"image": "  "}, McpSettings())
    assert str(caught.value) == (  # was cut at "e.g", and lowercased
        "'image' is missing: send the image inline as a base64 data URL, e.g. 'data:image/png;base64,iVBORw0KGgo...' "
        "(send a PNG, JPEG, WebP, GIF, BMP, TIFF or AVIF image)")


def test_the_structured_result_matches_its_schema_with_times_to_a_tenth_of_a_millisecond():
    stats = Stats(ttft_s=0.123456, total_s=2.000049, new_tokens=9, stop_reason="end_of_turn")
    out = structured_result(Result("A red disc.", stats, ("cut short",)))
    assert out == {"answer": "A red disc.", "ttft_s": 0.1235, "total_s": 2.0, "new_tokens": 9,
                   "stop_reason": "end_of_turn", "notices": ["cut short"]}
    jsonschema.validate(out, OUTPUT_SCHEMA)


@pytest.mark.parametrize("described, promised", [({"resolution": 512}, 512), ({}, 1024)])
def test_the_tools_promise_the_resolution_the_engine_runs_at(described, promised):
    pytest.importorskip("mcp")
    from fastvlm.api import ApiSettings
    from fastvlm.mcp.server import McpServer

    class Engine:  # what limits() reads: describe(); no config, as a remote engine
        def describe(self):
            return described

    assert McpServer(Engine(), ApiSettings(), host="127.0.0.1").limits().resolution == promised


@pytest.mark.parametrize("host, protected", [("127.0.0.1", True), ("localhost", True), ("0.0.0.0", False)])
def test_dns_rebinding_protection_is_on_only_on_loopback(host, protected):
    pytest.importorskip("mcp")
    from fastvlm.mcp.server import _dns_rebinding

    settings = _dns_rebinding(host, ("Proxy.Example",))
    assert settings.enable_dns_rebinding_protection is protected
    if protected:
        assert {"127.0.0.1:*", "localhost", "proxy.example", "proxy.example:*"} <= set(settings.allowed_hosts)
