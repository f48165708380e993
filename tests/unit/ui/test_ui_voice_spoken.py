"""An answer as it is spoken (`ui/voice/spoken.py`): what the mutation probe found untested (docs/testing.md)."""

from fastvlm import Request
from fastvlm.speech import SentenceChunker
from ui.voice.spoken import SpokenAnswer


class Queue:
    def __init__(self, unspoken=(), taken=0):
        self.left, self.taken, self.said = list(unspoken), taken, []

    def unspoken(self):
        return self.left

    def say(self, sentence):
        self.said.append(sentence)


def answer(queue, finished=True, spoken_over=False):
    done = SpokenAnswer(Request(None, "What is it?"), SentenceChunker(), queue, text="A cup. It is red.",
                        finished=finished, spoken_over=spoken_over)
    done.settled.set()
    return done


def test_an_answer_was_cut_unheard_only_when_speech_stopped_it_before_any_of_it_played():
    assert answer(Queue(taken=0), spoken_over=True).unheard_cut
    assert not answer(Queue(taken=1), spoken_over=True).unheard_cut
    assert not answer(Queue(taken=0), spoken_over=False).unheard_cut


def test_a_finished_answer_goes_on_only_with_what_was_made_and_never_played():
    assert answer(Queue(unspoken=())).going_on(Queue()) is None  # all of it was played: nothing goes on
    rest_queue = Queue()
    rest = answer(Queue(unspoken=["It is red."])).going_on(rest_queue)
    assert rest is not None and rest.finished and rest_queue.said[0] == "It is red."
    assert rest.request.answer_so_far == "A cup. It is red."
