"""Test images the doctor draws itself (no files to ship): what each shows is known, so answers can be judged."""

from __future__ import annotations

from PIL import Image, ImageDraw, ImageFont

SIDE = 768  # drawn size; the engine resizes to 512 or 1024 like any photo
DIGITS = "375"  # printed large; an answer must contain them in this order
FONTS = ("DejaVuSans-Bold.ttf", "LiberationSans-Bold.ttf", "Arial Bold.ttf", "Arial.ttf")


def red_disc(side: int = SIDE) -> Image.Image:
    """A large red disc on white."""
    img = Image.new("RGB", (side, side), "white")
    m = side // 8
    ImageDraw.Draw(img).ellipse((m, m, side - m, side - m), fill=(220, 20, 20))
    return img


def _font(px: int):
    for name in FONTS:
        try:
            return ImageFont.truetype(name, px)
        except OSError:
            continue
    return ImageFont.load_default(size=px)  # Pillow's own font (FreeType builds honour the size)


def digits(text: str = DIGITS, side: int = SIDE) -> Image.Image:
    """`text` in black, as wide as about 80 % of a white square."""
    img = Image.new("RGB", (side, side), "white")
    draw = ImageDraw.Draw(img)
    font = _font(side // 3)
    left, top, right, bottom = draw.textbbox((0, 0), text, font=font)
    if right - left < side // 2:  # a bitmap fallback font ignored the size: draw small, then scale up
        small = Image.new("RGB", (right - left + 4, bottom - top + 4), "white")
        ImageDraw.Draw(small).text((2 - left, 2 - top), text, fill="black", font=font)
        scale = side * 0.8 / small.width
        small = small.resize((int(small.width * scale), int(small.height * scale)), Image.Resampling.NEAREST)
        img.paste(small, ((side - small.width) // 2, (side - small.height) // 2))
        return img
    draw.text(((side - (right - left)) // 2 - left, (side - (bottom - top)) // 2 - top), text, fill="black", font=font)
    return img


def stripes(side: int = SIDE) -> Image.Image:
    """Blue and yellow stripes: a third, busier image for the embedding comparisons."""
    img = Image.new("RGB", (side, side), (250, 210, 40))
    draw = ImageDraw.Draw(img)
    for x in range(0, side, side // 8):
        draw.rectangle((x, 0, x + side // 16, side), fill=(30, 60, 200))
    return img


def drawn_images() -> dict[str, Image.Image]:
    """Every drawn image by name (the embedding comparisons run over all of them)."""
    return {"red disc": red_disc(), "digits": digits(), "stripes": stripes()}
