"""Images made for requests with image parts: real PNG files of the stated size (decoded by
Pillow, which matplotlib brings), a different one per request."""

from __future__ import annotations

import base64
import io

import pytest
from PIL import Image

from infercost.workload.images import image_part, png


@pytest.mark.parametrize(("width", "height"), [(16, 16), (300, 200), (1024, 768)])
def test_a_png_of_the_stated_size_that_a_decoder_reads(width: int, height: int) -> None:
    image = Image.open(io.BytesIO(png(width, height, 7)))
    image.load()  # decodes every row: a bad checksum or a short stream raises here
    assert (image.size, image.mode) == ((width, height), "RGB")
    # the first row begins with the request's number; the others repeat it
    assert image.getpixel((1, 0)) == (0, 0, 7)
    assert image.getpixel((1, height - 1)) == (0, 0, 7)


def test_no_two_requests_send_the_same_image() -> None:
    pixels = {Image.open(io.BytesIO(png(64, 64, seq))).tobytes() for seq in range(600)}
    assert len(pixels) == 600


def test_an_image_part_is_a_data_url() -> None:
    part = image_part(32, 16, 1)
    assert part["type"] == "image_url"
    prefix, data = part["image_url"]["url"].split(",", 1)
    assert prefix == "data:image/png;base64"
    assert base64.b64decode(data) == png(32, 16, 1)
