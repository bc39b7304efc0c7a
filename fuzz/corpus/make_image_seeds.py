#!/usr/bin/env python3
"""Writes fuzz/corpus/image/: tiny PNG and JPEG files (and data URLs of two of them) in the
harness's input form: one choice byte, three geometry bytes, then the file or the url text.
Needs python3-pil. Run from the repository root: python3 fuzz/corpus/make_image_seeds.py"""
import base64
import io
import os
import struct
import zlib

from PIL import Image

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "image")


def encode(im, fmt, **kw):
    b = io.BytesIO()
    im.save(b, format=fmt, **kw)
    return b.getvalue()


def png_chunk(kind, data):
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)


def png_of(width, height, idat):
    ihdr = struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0)  # 8-bit gray
    return (b"\x89PNG\r\n\x1a\n" + png_chunk(b"IHDR", ihdr) + png_chunk(b"IDAT", idat) +
            png_chunk(b"IEND", b""))


def hostile(files):
    """Files an attacker sends: a decompression bomb within the limits, sizes over them, cut files."""
    # 16384 x 2000 (33 MP) of zeros: a 32 KB file that decodes to 98 MB of RGB.
    files["png_bomb"] = png_of(16384, 2000, zlib.compress(b"\x00" * (16385 * 2000), 9))
    files["png_huge_dims"] = png_of(20000, 20000, zlib.compress(b"\x00" * 64))
    files["png_max_side"] = png_of(2**31 - 1, 1, zlib.compress(b"\x00" * 64))
    files["png_truncated"] = files["png_rgb"][: len(files["png_rgb"]) // 2]
    files["png_cut_idat"] = png_of(6000, 6000, zlib.compress(b"\x00" * 6001 * 50)[:40])
    jpeg = bytearray(files["jpeg_rgb"])
    sof = jpeg.find(b"\xff\xc0")
    jpeg[sof + 5:sof + 9] = struct.pack(">HH", 65000, 65000)  # height, width in the frame header
    files["jpeg_huge_dims"] = bytes(jpeg)
    files["jpeg_truncated"] = files["jpeg_rgb"][: len(files["jpeg_rgb"]) // 2]


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
    hostile(files)
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
