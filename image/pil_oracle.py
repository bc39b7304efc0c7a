#!/usr/bin/env python3
"""Oracle for image/: PlanImageGrid and ImagePatches against the release's image_processor.py.

The plan is compared with the release's plan_image_grid, re-implemented below from its published
semantics, over thousands of random sizes. The pictures are compared with python3-pil: generated
images in several modes and sizes (up- and down-scaling, odd sizes, tall, wide) are written as PNG
or JPEG, then PIL's convert("RGB") + ImageOps.pad (or resize) and the normalization are compared
with ds41_image_dump's fitted picture and patches. Exit 1 on any difference; prints the max
difference seen.
"""
import argparse
import io
import math
import os
import random
import struct
import subprocess
import sys
import tempfile
import zlib

import numpy as np
from PIL import Image, ImageOps

PATCH, DOWN, MAX_TOKENS, MIN_PIXELS = 14, 3, 1024, 295936


def tokens(h, w):
    return h * (w + 1) + 2


def grid(bh, bw):
    return math.ceil((bh // PATCH) / DOWN), math.ceil((bw // PATCH) / DOWN)


def solve(height, width):
    r = height / width
    mw = math.sqrt((MAX_TOKENS - 2) / r + 0.25) - 0.5
    mh = mw * r
    cell = PATCH * DOWN
    if mw < 1.0:
        return (MAX_TOKENS - 2) // 2 * cell, cell
    if mh < 1.0:
        return cell, (MAX_TOKENS - 3) * cell
    beta = min(math.floor(mw) * cell / width, math.floor(mh) * cell / height)
    return math.floor(height * beta / PATCH) * PATCH, math.floor(width * beta / PATCH) * PATCH


def plan(width, height, ratio):
    """(best_w, best_h, n_vit_w, n_vit_h, n_llm_w, n_llm_h, pad, tokens) as the release plans."""
    w0, h0 = width, height
    if ratio is not None and width > height * ratio:
        width = height * ratio
    if 0 < width * height < MIN_PIXELS:
        s = (MIN_PIXELS / (width * height)) ** 0.5
        width, height = int(width * s), int(height * s)
    bw, bh = math.ceil(width / PATCH) * PATCH, math.ceil(height / PATCH) * PATCH
    nh, nw = grid(bh, bw)
    if tokens(nh, nw) > MAX_TOKENS:
        bh, bw = solve(height, width)
        nh, nw = grid(bh, bw)
    pad = 0 if (ratio is not None and w0 >= ratio * h0) else 1
    return (bw, bh, bw // PATCH, bh // PATCH, nw, nh, pad, tokens(nh, nw))


def check_plans(dump, rng):
    sizes = []
    for _ in range(4000):
        kind = rng.random()
        if kind < 0.4:
            sizes.append((rng.randint(1, 4000), rng.randint(1, 4000)))
        elif kind < 0.7:
            sizes.append((rng.randint(1, 600), rng.randint(1, 600)))
        else:
            sizes.append((rng.randint(1, 16384), rng.randint(1, 64)) if rng.random() < 0.5
                         else (rng.randint(1, 64), rng.randint(1, 16384)))
    sizes += [(1344, 1344), (1, 1), (544, 544), (1, 16384), (16384, 1)]
    bad = 0
    for ratio in (None, 2.0, 3.5):
        args = [dump, "plan"] + ([] if ratio is None else [repr(ratio)])
        text = "".join(f"{w} {h}\n" for w, h in sizes)
        out = subprocess.run(args, input=text, capture_output=True, text=True, check=True).stdout.splitlines()
        for (w, h), line in zip(sizes, out):
            want = " ".join(str(v) for v in plan(w, h, ratio))
            if line != want:
                bad += 1
                if bad < 10:
                    print(f"plan {w}x{h} ratio {ratio}: ours {line!r}, release {want!r}")
    print(f"plans: {3 * len(sizes)} sizes compared, {bad} differ")
    return bad == 0


def bf16(x):
    u = x.astype(np.float32).view(np.uint32).astype(np.uint64)
    u = (u + 0x7FFF + ((u >> 16) & 1)) & 0xFFFF0000
    return u.astype(np.uint32).view(np.float32)


def release_patches(image, ratio):
    """load_image from the release, after decoding: returns (fitted uint8 HWC, patches)."""
    rgb = image.convert("RGB")
    bw, bh, nvw, nvh = plan(rgb.width, rgb.height, ratio)[:4]
    if ratio is not None and rgb.width >= ratio * rgb.height:
        fitted = rgb.resize((bw, bh))
    else:
        fitted = ImageOps.pad(rgb, (bw, bh), color=(127, 127, 127))
    arr = np.asarray(fitted, dtype=np.uint8)
    x = arr.astype(np.float32).transpose(2, 0, 1) / np.float32(255)
    x = bf16((x - np.float32(0.5)) / np.float32(0.5))
    p = x.reshape(3, nvh, PATCH, nvw, PATCH).transpose(1, 3, 0, 2, 4).reshape(nvh * nvw, 3 * PATCH * PATCH)
    return arr, p


def picture(rng, w, h):
    """Smooth gradients plus noise and a hard edge: exercises every filter tap."""
    yy, xx = np.mgrid[0:h, 0:w]
    r = (xx * 255 // max(w - 1, 1))
    g = (yy * 255 // max(h - 1, 1))
    b = np.asarray(np.random.default_rng(rng.randint(0, 1 << 30)).integers(0, 256, (h, w)))
    b[:, : w // 3] = 0
    return np.stack([r, g, b], axis=-1).astype(np.uint8)


def png16(path, arr16, color_type):
    """A 16-bit PNG PIL cannot write itself (RGB 16-bit)."""
    h, w = arr16.shape[:2]
    raw = b"".join(b"\x00" + arr16[y].astype(">u2").tobytes() for y in range(h))

    def chunk(t, d):
        return struct.pack(">I", len(d)) + t + d + struct.pack(">I", zlib.crc32(t + d) & 0xFFFFFFFF)

    with open(path, "wb") as f:
        f.write(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 16, color_type, 0, 0, 0))
                + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b""))


def cases(rng, tmp):
    sizes = [(1, 1), (3, 7), (37, 23), (100, 100), (544, 544), (301, 97), (97, 301), (1344, 1344),
             (1500, 901), (2000, 333), (333, 2000), (5, 700), (1024, 1)]
    i = 0
    for w, h in sizes:
        arr = picture(rng, w, h)
        rgb = Image.fromarray(arr, "RGB")
        variants = [("rgb", rgb, "PNG", {}), ("jpeg", rgb, "JPEG", {"quality": 90})]
        if w * h < 400000:
            variants += [
                ("gray", rgb.convert("L"), "PNG", {}),
                ("rgba", rgb.convert("RGBA"), "PNG", {}),
                ("palette", rgb.convert("P"), "PNG", {}),
                ("la", rgb.convert("LA"), "PNG", {}),
                ("interlaced", rgb, "PNG", {"interlace": 1}),
                ("bilevel", rgb.convert("1"), "PNG", {}),
                ("grayjpeg", rgb.convert("L"), "JPEG", {"quality": 75}),
                ("progressive", rgb, "JPEG", {"progressive": True, "subsampling": 2}),
            ]
        for name, im, fmt, kw in variants:
            i += 1
            path = os.path.join(tmp, f"{i}_{name}_{w}x{h}.{fmt.lower()}")
            im.save(path, format=fmt, **kw)
            yield path, None
        if w * h < 400000:
            i += 1
            path = os.path.join(tmp, f"{i}_gray16_{w}x{h}.png")
            Image.fromarray((arr[..., 0].astype(np.uint16) * 3), "I;16").save(path)
            yield path, None
            i += 1
            path = os.path.join(tmp, f"{i}_rgb16_{w}x{h}.png")
            png16(path, arr.astype(np.uint16) * 257 + 3, 2)
            yield path, None
    # The stretch branch (a max_wh_ratio the release's config may set).
    for w, h in [(700, 100), (300, 150), (101, 100)]:
        i += 1
        path = os.path.join(tmp, f"{i}_stretch_{w}x{h}.png")
        Image.fromarray(picture(rng, w, h), "RGB").save(path)
        yield path, 2.0


def check_pictures(dump, rng):
    ok = True
    max_px = 0
    max_patch = 0.0
    n = 0
    with tempfile.TemporaryDirectory() as tmp:
        for path, ratio in cases(rng, tmp):
            n += 1
            rgb_out, patch_out = os.path.join(tmp, "fit.rgb"), os.path.join(tmp, "patch.f32")
            args = [dump, "image", path, rgb_out, patch_out] + ([] if ratio is None else [repr(ratio)])
            res = subprocess.run(args, capture_output=True, text=True)
            if res.returncode != 0:
                print(f"{os.path.basename(path)}: dump failed: {res.stderr.strip()}")
                ok = False
                continue
            with Image.open(path) as im:
                want_rgb, want_patch = release_patches(im, ratio)
                want_plan = " ".join(str(v) for v in plan(im.width, im.height, ratio))
            if res.stdout.strip() != want_plan:
                print(f"{os.path.basename(path)}: plan {res.stdout.strip()!r} != {want_plan!r}")
                ok = False
                continue
            got_rgb = np.fromfile(rgb_out, dtype=np.uint8).reshape(want_rgb.shape)
            got_patch = np.fromfile(patch_out, dtype=np.float32).reshape(want_patch.shape)
            d_px = int(np.abs(got_rgb.astype(int) - want_rgb.astype(int)).max())
            d_patch = float(np.abs(got_patch - want_patch).max())
            max_px, max_patch = max(max_px, d_px), max(max_patch, d_patch)
            if d_px or d_patch:
                print(f"{os.path.basename(path)}: max pixel difference {d_px}, max patch difference {d_patch}")
                ok = False
    print(f"pictures: {n} files compared with PIL {Image.__version__}; max pixel difference {max_px}, "
          f"max patch difference {max_patch}")
    return ok


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dump", required=True, help="path of ds41_image_dump")
    ap.add_argument("--seed", type=int, default=27)
    args = ap.parse_args()
    rng = random.Random(args.seed)
    ok = check_plans(args.dump, rng)
    ok = check_pictures(args.dump, rng) and ok
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
