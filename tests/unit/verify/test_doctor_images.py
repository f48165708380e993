"""The pictures doctor judges real answers on show what their names say: a red disc in the middle of white, the
digits whole and centred at about 80 % of the width (also with a small font scaled up), eight blue stripes."""

from __future__ import annotations

import numpy as np
import pytest
from PIL import ImageFont

from fastvlm.verify.doctor import images

SIDE = images.SIDE


def ink(img) -> np.ndarray:
    """(h, w) True where the digits' black is."""
    return np.asarray(img.convert("L")) < 128


def test_the_red_disc_fills_the_middle_and_leaves_the_corners_white():
    px = np.asarray(images.red_disc())
    assert px.shape == (SIDE, SIDE, 3)
    assert tuple(px[SIDE // 2, SIDE // 2]) == (220, 20, 20) and tuple(px[5, 5]) == (255, 255, 255)
    red = (px == (220, 20, 20)).all(axis=2)
    assert red.mean() == pytest.approx(np.pi * (3 / 8) ** 2, abs=0.01)  # a disc 3/4 of the side across
    rows, cols = np.nonzero(red)
    assert abs(rows.mean() - SIDE / 2) < 2 and abs(cols.mean() - SIDE / 2) < 2


@pytest.mark.parametrize("font, off_centre", [("the doctor's", 0.01), ("a small bitmap-like one", 0.03)])
def test_the_digits_are_whole_centred_and_about_80_percent_wide(font, off_centre, monkeypatch):
    if font != "the doctor's":  # drawn small and scaled up (its glyphs' ink sits ~1.7 % left of their box)
        monkeypatch.setattr(images, "_font", lambda px: ImageFont.load_default(size=12))
    black = ink(images.digits())
    rows, cols = np.nonzero(black)
    assert not black[0].any() and not black[-1].any() and not black[:, 0].any() and not black[:, -1].any()
    width = cols.max() - cols.min() + 1
    assert 0.5 * SIDE <= width <= 0.9 * SIDE
    assert abs((cols.min() + cols.max()) / 2 - SIDE / 2) < off_centre * SIDE
    assert abs((rows.min() + rows.max()) / 2 - SIDE / 2) < off_centre * SIDE


def test_the_digits_read_left_to_right_as_three_separate_figures():
    columns = ink(images.digits()).any(axis=0).astype(int)
    starts = np.flatnonzero(np.diff(columns) == 1)
    assert len(starts) == len(images.DIGITS)


def test_the_stripes_are_eight_blue_bars_on_yellow():
    px = np.asarray(images.stripes())
    blue = (px == (30, 60, 200)).all(axis=2)
    yellow = (px == (250, 210, 40)).all(axis=2)
    assert (blue | yellow).all() and (blue == blue[0]).all()  # bars the full height
    assert np.count_nonzero(np.diff(blue[0].astype(int)) == 1) + int(blue[0, 0]) == 8
    assert blue.mean() == pytest.approx(0.5, abs=0.02)


def test_every_drawn_image_is_named_and_of_the_drawn_size():
    drawn = images.drawn_images()
    assert set(drawn) == {"red disc", "digits", "stripes"}
    assert all(img.size == (SIDE, SIDE) and img.mode == "RGB" for img in drawn.values())
