"""Whether a transcript is a question, a spoken "stop", or only an acknowledgement (fastvlm/speech/intent.py)."""

import pytest

from fastvlm.speech.intent import intent, words


@pytest.mark.parametrize("text", ["Stop.", "Stop!", "Okay, stop.", "Stop, stop.", "Never mind.", "Nevermind.",
                                  "That’s enough.", "That's enough, thanks.", "Uh, never mind.", "OK. Stop talking.",
                                  "Be quiet!", "Cancel that."])
def test_only_stop_phrases_with_courtesies_and_hesitations_around_them_are_a_stop(text):
    assert intent(text) == "stop"


@pytest.mark.parametrize("text", ["Okay.", "Oh, okay.", "Yeah.", "Thank you.", "Thanks!", "All right.", "I see.",
                                  "Mm-hmm.", "Got it, thanks."])
def test_only_acknowledgements_ask_nothing_and_stop_nothing(text):
    assert intent(text) == "acknowledge"


@pytest.mark.parametrize("text", ["Say that again.", "Sorry, can you say that again?", "Pardon?", "What did you say?",
                                  "Could you repeat that, please?", "Okay, one more time."])
def test_only_repeat_phrases_with_courtesies_around_them_ask_for_the_answer_again(text):
    assert intent(text) == "repeat"


def test_a_stop_outranks_a_repeat_and_a_repeat_inside_a_question_is_a_question():
    assert intent("Stop. Say that again.") == "stop"
    assert intent("Say that again and then stop.") == "ask"
    assert intent("Pardon?", repeat_phrases=()) == "ask"


@pytest.mark.parametrize("text", ["What does the stop sign say?", "Stop the car?", "Is that enough?",
                                  "Yes, what is that?", "Okay, what color is it?", "Never mind the cup, what is that?",
                                  "Enough of this. What am I holding?", "Quiet here, isn't it?", ""])
def test_anything_else_is_a_question(text):
    assert intent(text) == "ask"


@pytest.mark.parametrize("text", ["What is on the table? Never mind.", "What color is it? No, stop!",
                                  "Can you read this? Okay, that's enough."])
def test_a_question_taken_back_in_its_last_sentence_is_a_stop(text):
    assert intent(text) == "stop"


@pytest.mark.parametrize("text", ["Stop. What is that?", "What is this? Okay.", "What is it? Um.",
                                  "What is on the table never mind", "Tell me when to stop."])
def test_a_last_sentence_that_asks_or_only_acknowledges_leaves_a_question_a_question(text):
    assert intent(text) == "ask"


def test_empty_phrase_lists_turn_either_off():
    assert intent("Stop.", stop_phrases=()) == "ask"
    assert intent("Okay.", acknowledgements=()) == "ask"
    assert intent("Okay, stop.", acknowledgements=()) == "ask"  # "okay" is no longer a courtesy around the stop
    assert intent("Hold on.", stop_phrases=("hold on",)) == "stop"  # a list of one's own


def test_words_that_read_as_a_stop_phrase_one_way_are_a_stop_whichever_way_is_read_last():
    assert intent("Hold on.", stop_phrases=("hold on",), acknowledgements=("hold", "on")) == "stop"
    assert intent("On hold.", stop_phrases=("hold on",), acknowledgements=("hold", "on")) == "acknowledge"


def test_words_are_lower_case_without_punctuation_or_apostrophes():
    assert words("That’s ENOUGH, don't!") == ("thats", "enough", "dont")
    assert words("...") == ()
