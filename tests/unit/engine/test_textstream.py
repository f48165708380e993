from fastvlm.engine.textstream import StopMatcher, Utf8Stream


def test_multibyte_characters_split_across_tokens_come_out_whole():
    data = "héllo 🌍 世界".encode()
    stream = Utf8Stream()
    pieces = [stream.feed(data[i : i + 1]) for i in range(len(data))] + [stream.flush()]
    assert "".join(pieces) == "héllo 🌍 世界"
    assert all("\ufffd" not in p for p in pieces)


def test_unfinished_character_at_the_end_is_replaced_not_lost_silently():
    stream = Utf8Stream()
    assert stream.feed(b"a" + "🌍".encode()[:2]) == "a"
    assert stream.flush() == "\ufffd"


def test_stop_string_across_deltas_is_held_back_and_cut():
    m = StopMatcher(("STOP",))
    out = [m.feed("abc ST"), m.feed("O"), m.feed("P tail")]
    assert out == [("abc ", False), ("", False), ("", True)]


def test_stop_prefix_that_does_not_complete_is_released():
    m = StopMatcher(("STOP",))
    assert m.feed("xS") == ("x", False)
    assert m.feed("x") == ("Sx", False)
    assert m.flush() == ""
