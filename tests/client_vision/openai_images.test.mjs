// Image input end to end (issue 27 items 3-4): the official `openai` npm package sends image_url
// parts (base64 PNG data URLs) to a local cluster serving a model with a vision tower:
//   DS41_MODEL_PRESET=tiny-vision DS41_UNIT_TOKENS=16 tests/client/with_cluster.sh build node --test tests/client_vision/
// The encoders run the tower (serving/engine_prompt.h); an image's span of positions carries key
// tokens derived from its pixels, so a repeated image hits the cache like repeated text does.
import { test, describe } from 'node:test';
import assert from 'node:assert/strict';
import zlib from 'node:zlib';
import { OpenAI } from '../../tools/replay/load_openai.mjs';

const baseURL = process.env.DS41_BASE_URL;
const MODEL = process.env.DS41_MODEL || 'deepseek-v4.1-flash';
const UNIT = Number(process.env.DS41_UNIT_TOKENS || 64);  // the cluster's cache unit
const skip = baseURL ? false : 'DS41_BASE_URL is not set (no cluster to test against)';
const client = baseURL
  ? new OpenAI({ baseURL, apiKey: process.env.DS41_API_KEY || 'sk-ds41-test', maxRetries: 0, timeout: 120_000 })
  : null;

// A PNG file (8-bit RGB, no filter) of width x height whose pixels come from f(x, y) -> [r, g, b].
const CRC = new Int32Array(256).map((_, n) => {
  let c = n;
  for (let k = 0; k < 8; k++) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1;
  return c;
});
function crc32(buf) {
  let c = -1;
  for (const b of buf) c = CRC[(c ^ b) & 0xff] ^ (c >>> 8);
  return (c ^ -1) >>> 0;
}
function chunk(type, data) {
  const out = Buffer.alloc(12 + data.length);
  out.writeUInt32BE(data.length, 0);
  out.write(type, 4, 'ascii');
  data.copy(out, 8);
  out.writeUInt32BE(crc32(out.subarray(4, 8 + data.length)), 8 + data.length);
  return out;
}
function png(width, height, f) {
  const raw = Buffer.alloc((width * 3 + 1) * height);
  for (let y = 0; y < height; y++) {
    for (let x = 0; x < width; x++) raw.set(f(x, y), y * (width * 3 + 1) + 1 + x * 3);
  }
  const ihdr = Buffer.alloc(13);
  ihdr.writeUInt32BE(width, 0);
  ihdr.writeUInt32BE(height, 4);
  ihdr.set([8, 2, 0, 0, 0], 8);
  return Buffer.concat([Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]), chunk('IHDR', ihdr),
    chunk('IDAT', zlib.deflateSync(raw)), chunk('IEND', Buffer.alloc(0))]);
}
const dataUrl = (buf) => `data:image/png;base64,${buf.toString('base64')}`;
const gradient = png(40, 28, (x, y) => [x * 6, y * 9, (x * y) % 256]);
const checker = png(40, 28, (x, y) => ((x >> 2) + (y >> 2)) % 2 ? [250, 250, 250] : [5, 5, 5]);

function ask(image, text = 'What is in this picture?') {
  return client.chat.completions.create({
    model: MODEL, max_tokens: 8, temperature: 0,
    messages: [{ role: 'user', content: [{ type: 'text', text }, { type: 'image_url', image_url: { url: dataUrl(image) } }] }],
  });
}

describe('image input with the official openai client', { skip }, () => {
  test('an image request is answered, its span counted in the prompt, and a repeat hits the cache through the image', async () => {
    const textOnly = await client.chat.completions.create({
      model: MODEL, max_tokens: 8, temperature: 0,
      messages: [{ role: 'user', content: [{ type: 'text', text: 'What is in this picture?' }] }],
    });
    const first = await ask(gradient);
    assert.equal(first.object, 'chat.completion');
    assert.equal(typeof first.choices[0].message.content, 'string');
    // The placeholder becomes the whole span (delimiters included) and a blank line joins the parts.
    assert.ok(first.usage.prompt_tokens > textOnly.usage.prompt_tokens + 4,
      `the image's span is in the prompt (${first.usage.prompt_tokens} vs ${textOnly.usage.prompt_tokens} without)`);
    // (The replies may differ: the repeat rebuilds the window's state by a bounded replay, which past
    // the window is not the exact path: MODEL.md §10.4.)
    const again = await ask(gradient);
    const other = await ask(checker);
    const summary = `first hit ${first.usage.prompt_cache_hit_tokens}, repeat hit ${again.usage.prompt_cache_hit_tokens}, ` +
      `other image hit ${other.usage.prompt_cache_hit_tokens}, prompt ${first.usage.prompt_tokens}`;
    // The repeat reuses the units past the image; another picture with the same text does not.
    assert.ok(again.usage.prompt_cache_hit_tokens > other.usage.prompt_cache_hit_tokens, summary);
    assert.ok(again.usage.prompt_cache_hit_tokens >= first.usage.prompt_tokens - UNIT, summary);
    assert.ok(first.usage.prompt_tokens >= 2 * UNIT, `a prompt of whole units past the image (${summary})`);
    assert.equal(other.usage.prompt_tokens, first.usage.prompt_tokens, 'same size: same span length');
  });

  test('bad images are a 400 naming the content part', async () => {
    const bad = [
      'data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAAB',  // a truncated PNG
      'data:image/png;base64,@@@@',                             // not base64
      'https://example.com/cat.png',                            // the server fetches nothing
      'data:image/webp;base64,UklGRg==',                        // not PNG or JPEG
    ];
    for (const url of bad) {
      await assert.rejects(
        client.chat.completions.create({
          model: MODEL, max_tokens: 4,
          messages: [{ role: 'user', content: [{ type: 'text', text: 'hi' }, { type: 'image_url', image_url: { url } }] }],
        }),
        (e) => {
          assert.equal(e.status, 400, `${url}: ${e.message}`);
          assert.match(e.message, /messages\[0\]\.content\[1\]/, url);
          return true;
        },
      );
    }
  });
});
