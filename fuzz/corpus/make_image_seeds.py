#!/usr/bin/env python3
"""Writes fuzz/corpus/image/: tiny PNG and JPEG files (and data URLs of two of them) in the
harness's input form: one choice byte, three geometry bytes, then the file or the url text.
Needs python3-pil. Run from the repository root: python3 fuzz/corpus/make_image_seeds.py"""
import base64
import io
import os

from PIL import Image

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "image")


def encode(im, fmt, **kw):
    b = io.BytesIO()
    im.save(b, format=fmt, **kw)
    return b.getvalue()


def main():
    os.makedirs(OUT, exist_ok=True)
    rgb = Image.new("RGB", (5, 3))
    rgb.putdata([(i * 40 % 256, i * 90 % 256, i * 13 % 256) for i in range(15)])
    files = {
        "png_rgb": encode(rgb, "PNG"),
        "png_gray": encode(rgb.convert("L"), "PNG"),
        "png_palette": encode(rgb.convert("P"), "PNG"),
        "png_rgba_interlaced": encode(rgb.convert("RGBA"), "PNG", interlace=1),
        "png_bilevel": encode(rgb.convert("1"), "PNG"),
        "png_gray16": encode(Image.new("I;16", (3, 2), 700), "PNG"),
        "jpeg_rgb": encode(rgb.resize((16, 9)), "JPEG", quality=80),
        "jpeg_gray": encode(rgb.convert("L"), "JPEG"),
        "jpeg_progressive": encode(rgb.resize((9, 17)), "JPEG", progressive=True),
    }
    for name, data in files.items():
        with open(os.path.join(OUT, name), "wb") as f:
            f.write(b"\x00\x03\x02\x1c" + data)
    for name in ("png_rgb", "jpeg_rgb"):
        mime = "image/png" if name.startswith("png") else "image/jpeg"
        url = f"data:{mime};base64," + base64.b64encode(files[name]).decode()
        with open(os.path.join(OUT, "url_" + name), "wb") as f:
            f.write(b"\x01\x03\x02\x1c" + url.encode())


if __name__ == "__main__":
    main()
