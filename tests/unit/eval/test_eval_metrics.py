"""The eval's scores at their edges: the confusion counts POPE reports, a single reference answer, and
predictions that do not line up with their answers (an error, never a silently shorter score)."""

from __future__ import annotations

import pytest

from fastvlm.eval.metrics import ocrbench_scores, pope_metrics, vqa_accuracy


def test_pope_reports_each_cell_of_the_confusion_matrix():
    predictions = ["Yes.", "Yes", "yes", "No", "no", "No, it is not.", "Maybe", None]
    labels = ["yes", "yes", "no", "no", "yes", "yes", "yes", "no"]
    m = pope_metrics(predictions, labels)
    assert (m["tp"], m["fp"], m["tn"], m["fn"]) == (2, 1, 1, 2)  # "Maybe" and no answer are in no cell
    assert m["unparsed"] == 1  # "Maybe": answered, not read; a missing answer is not counted as unparsed
    assert m["recall"] == pytest.approx(2 / 5) and m["precision"] == pytest.approx(2 / 3)


def test_pope_refuses_predictions_and_labels_that_do_not_line_up():
    with pytest.raises(ValueError):
        pope_metrics(["yes", "no"], ["yes"])


@pytest.mark.parametrize("prediction, expected", [("Two.", 1.0), ("2", 1.0), ("three", 0.0), (None, 0.0)])
def test_one_reference_answer_is_an_exact_match_after_normalisation(prediction, expected):
    assert vqa_accuracy(prediction, ["2"]) == expected


def test_ocrbench_refuses_predictions_and_answers_that_do_not_line_up():
    with pytest.raises(ValueError):
        ocrbench_scores(["a", "b"], [["a"]], ["Doc-oriented VQA"])
