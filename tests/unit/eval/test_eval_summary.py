"""The eval's summary from recorded rows: what it counts, when it breaks scores down by category, and the
message when a resumed file was made with another model."""

from __future__ import annotations

import pytest

from fastvlm.eval.data import Item
from fastvlm.eval.runner import ResumeError, RunSettings, check_resume, format_summary, summarize


def _pope(n: int, category: str | None = None) -> list[Item]:
    return [Item(f"{category}/{i}", f"{i}.jpg", "Is there a dog?", ("yes",), category, None) for i in range(n)]


def test_items_without_a_row_are_counted_as_not_answered():
    items = _pope(5)
    done = {"None/0": {"prediction": "yes"}, "None/1": {"prediction": None}, "None/2": {"prediction": "no"}}
    s = summarize("pope", items, done)
    assert (s["n"], s["not_answered"], s["errors"]) == (3, 2, 1)
    assert s["metrics"]["tp"] == 1 and s["metrics"]["fn"] == 1  # the label falls back to the first answer
    assert "by_category" not in s  # no categories: nothing to break down
    assert format_summary(s).startswith("task pope: 3 scored, 1 failed, 2 not answered")


@pytest.mark.parametrize("categories, broken_down", [(["adversarial"], True), (["a", "b"], True), ([None], False)])
def test_scores_are_broken_down_by_category_when_there_is_one(categories, broken_down):
    items = [it for c in categories for it in _pope(2, c)]
    done = {it.id: {"prediction": "yes"} for it in items}
    for task in ("pope", "gqa"):
        s = summarize(task, items, done)
        assert ("by_category" in s) is broken_down
        if broken_down:
            assert set(s["by_category"]) == set(categories)


def test_no_scored_item_is_an_accuracy_of_zero():
    s = summarize("gqa", _pope(2), {})
    assert s["metrics"] == {"n": 0, "accuracy": 0.0} and s["not_answered"] == 2


def test_ocrbench_groups_are_printed_under_their_heading():
    items = [Item("1", "1.png", "what is written?", ("HELLO",), "Regular Text Recognition")]
    text = format_summary(summarize("ocrbench", items, {"1": {"prediction": "hello"}}))
    assert "  groups:\n    Text Recognition" in text and "total" in text


def test_a_resumed_file_from_another_model_names_only_what_changed(tmp_path):
    ours = {"vision": "v.onnx", "llm": "llm.gguf", "quant": "q8_0", "cpu": "EPYC"}
    settings = RunSettings("pope", tmp_path, 16, 512, model=ours)
    row = {"id": "1", **settings.stamp(), "model": {**ours, "quant": "bf16"}}
    with pytest.raises(ResumeError) as e:
        check_resume({"1": row}, settings, tmp_path / "res.jsonl")
    assert "quant bf16 -> now q8_0" in str(e.value) and "vision" not in str(e.value).split("(")[1]


def test_a_failed_answer_is_recorded_with_its_time(tmp_path):
    from fastvlm.eval.runner import answer_item
    from tests.unit.eval.test_eval import FakeEngine

    item = Item("1", "1.jpg", "Is there a dog?", ("yes",))
    engine = FakeEngine({"Is there a dog?": ValueError("bad image")})
    row = answer_item(engine, item, RunSettings("pope", tmp_path, 16, 512))
    assert row["prediction"] is None and row["error"] == "ValueError: bad image"
    assert 0 <= row["time_s"] < 5 and row["task"] == "pope"


def test_written_items_are_counted_and_read_back_whole(tmp_path):
    from fastvlm.eval.data import load_items, write_items

    items = [Item("1", "ä.jpg", "Qu'est-ce que c'est ?", ("un chat",), "fr"), Item("2", "b.jpg", "Is it?", ("no",))]
    path = tmp_path / "new" / "folder" / "items.jsonl"
    assert write_items(items, path) == 2
    assert load_items(path) == items
    assert "ä.jpg" in path.read_text(encoding="utf-8")  # written as UTF-8, not escaped
