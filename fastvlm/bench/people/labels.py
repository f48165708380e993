"""Where each recording's sentences end and where people pause mid-sentence (seconds into the recording).

How they were made (2026-12-06): Silero VAD (threshold 0.5, off below 0.35, as the turn taker) split each
recording at every quiet of 0.15 s or more; Whisper tiny.en transcribed each piece; each quiet was marked, from the
words either side of it, as a sentence's end or a pause inside one (nobody listened: the labels rest on Whisper's
words and on sample.stm). Times are Silero's, to 0.01 s; texts are Whisper's words corrected where the sense was
plain, and the call's are its own transcript (sample.stm). A unit that would run past 30 s (the turn taker's
`max_audio_s`) is cut short and labelled `finished=False`: no rule is wrong to wait for more at its end, and only
its pauses before the end can be cut.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Unit:
    """One person's stretch of speech that a turn may end after: from `start_s` (after a pause) to `end_s`."""

    start_s: float
    end_s: float
    text: str
    mids: tuple[tuple[float, float], ...] = ()  # (from, to): the quiets inside a sentence, in order
    finished: bool = True  # `end_s` is a sentence's end (False: the unit stops mid-sentence)


UNITS: dict[str, tuple[Unit, ...]] = {
    "lecture": (
        Unit(0.03, 2.02, "and says, how do I get to Dublin?"),
        Unit(2.72, 6.82, "And the answer that comes back is, well, I wouldn't start from here, Sonny."),
        Unit(9.34, 26.00, "That is to say much of political philosophy develops theories, uh, that take no account "
             "of where we actually are, and how the theories that people argue about in the journals and in the "
             "literature",  # cut off mid-speech at 26.00 s: with the rest it would run past 30 s
             ((15.07, 15.36), (15.81, 16.32), (17.89, 18.40), (19.58, 20.38)), finished=False),
        Unit(20.38, 46.78, "where we actually are, and how the theories that people argue about in the journals and "
             "in the literature actually could be implemented in the world, if at all. This spills over into "
             "normative arguments made by other scholars. Thomas Piketty, in his book, Capital in the 21st "
             "century, argues for a 4% global wealth tax.",
             ((37.57, 37.98), (38.88, 39.94), (43.30, 43.65), (44.58, 45.09))),
        Unit(48.90, 49.92, "Well, good luck with that."),
        Unit(51.10, 54.21, "Who's going to implement a 4% global wealth tax?"),
        Unit(54.53, 59.52, "So when I think about normative questions,", ((57.34, 57.54),), finished=False),
    ),
    "news": (
        Unit(2.50, 5.98, "Donald Trump and Sarah Palin with an encore performance today."),
        Unit(6.18, 8.45, "Everybody wanted her endorsement."),
        Unit(8.67, 11.52, "She said, what you're doing, Donald, is amazing."),
        Unit(11.71, 17.41, "The duo hitting the campaign trail together in Oklahoma. We have a movement going on, "
             "folks. We have a movement."),
        Unit(17.76, 25.57, "This is not... This is not a normal situation. People are sick and tired and fed up, "
             "and yes, we're angry.", ((18.40, 19.01), (23.87, 24.10))),
        Unit(26.18, 27.10, "We are angry."),
        Unit(28.26, 32.58, "Rallying supporters at the conservative Christian university, Oral Roberts."),
        Unit(32.86, 38.91, "And here we got a redhead from the big red apple running for president.",
             ((33.41, 34.43), (37.79, 37.98))),
        Unit(39.10, 45.34, "And yet, the GOP machine, all of a sudden, they're saying we're not red enough.",
             ((39.74, 40.26), (43.39, 43.65))),
        Unit(45.70, 47.33, "We're not conservative enough."),
        Unit(47.68, 51.71, "And I say, what in the world do they know about conservatism?", ((48.58, 49.09),)),
        Unit(52.00, 64.70, "Palin's support a boost to Trump's conservative credentials and a potential momentum "
             "killer for Ted Cruz, threatening to undercut his main argument against Trump: Trump is a closet "
             "liberal."),
        Unit(65.47, 74.88, "Trump flying solo this morning in Iowa, despite a campaign announcement that Palin would "
             "travel with the GOP front runner to both of today's events."),
        Unit(75.23, 78.69, "How can you be running with a cloud over your head?"),
        Unit(79.14, 83.36, "Giving Trump the spotlight to himself to unload on Ted Cruz."),
        Unit(83.55, 87.49, "With it being a Canadian citizen, he said, oh, I didn't know that.", ((83.97, 84.22),)),
        Unit(88.86, 89.92, "How did he not know that?"),
        Unit(90.98, 94.08, "Then he said, with the loans, oh, I didn't know that.", ((92.70, 93.31),)),
        Unit(94.88, 96.70, "Smart guy. He doesn't know that?"),
        Unit(97.54, 99.71, "Yeah, that's worse than Hillary, when you think about it."),
        Unit(100.38, 102.14, "And twist the knife a bit."),
        Unit(102.43, 104.06, "Do you have a great governor in this state?"),
        Unit(105.22, 111.04, "Terry Branstad came out yesterday and he said, you can't have, you can't have Cruz.",
             ((109.28, 109.73),)),
        Unit(111.30, 113.44, "And I think it has to do with more than ethanol."),
        Unit(114.14, 120.54, "Cruz, today in New Hampshire, launching a fresh attack at Trump for favoring big "
             "government when it comes to energy policy."),
        Unit(120.83, 132.54, "Donald Trump promised not only to protect the ethanol mandate but to expand it, to have "
             "the federal government do even more picking winners and losers by mandating ethanol be a larger part "
             "of the marketplace.", ((128.06, 128.45),)),
        Unit(133.12, 142.72, "Amid this battle, there are no signs of wear for Trump. A new national poll showing "
             "Trump way out in front with more than twice as much support as his closest rival."),
        Unit(143.01, 149.44, "And in the CNN WMUR New Hampshire poll, Trump tops the pack 20 points ahead of everyone "
             "else."),
        Unit(149.95, 155.62, "Facing these headwinds, Ted Cruz making a big point today to show he's trying to keep "
             "his spirits up."),
        Unit(155.94, 157.12, "Style matters."),
        Unit(158.08, 160.99, "Look, would it kill Republicans to crack a joke?", ((159.84, 160.13),)),
        Unit(162.78, 164.19, "Actually, some of them, I think it might."),
        Unit(165.98, 168.16, "You know, have a little fun for Pete's sake."),
    ),
    "call": (  # one person's turn each, from sample.stm's times; the other person is heard where they overlap
        Unit(6.68, 7.16, "Hello?"),
        Unit(7.634, 8.155, "Hello?"),
        Unit(8.436, 9.798, "Oh, hello. I didn't know you were there."),
        Unit(9.838, 10.78, "Neither did I."),
        Unit(10.78, 14.184, "Okay, then I thought you know, I heard a beep. This is Diane in New Jersey."),
        Unit(14.444, 17.769, "And I'm Sheila in Texas, originally from Chicago."),
        Unit(17.789, 21.475, "Oh, I'm originally from Chicago also. I'm in New Jersey now though."),
        Unit(21.935, 28.425, "Well, there isn't that much difference. At least you know, they all call me a Yankee "
             "down here, so what can I say?"),
        Unit(28.445, 29.987, "Oh, I don't hear that in New Jersey now."),
    ),
}
