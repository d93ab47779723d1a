// POST /v1/embeddings through the official OpenAI Node SDK's
// embeddings.create against the real pacelined serving an embedding model:
// the oracle qwen3 F32 file (../shared/oracle) given `qwen3.pooling_type`
// = 3 (last), whose embeddings llama.cpp computed
// (tests/engine/cpu/data/embedding_reference.json). Token-id inputs (one,
// several), the SDK's default (it asks for base64 and decodes it), explicit
// float and base64, texts (one, several: each the same as its token ids
// from /tokenize), dimensions, and the 400 of a generation model
// (stories260K).
//
// Environment: as openai_client.test.mjs (ctest openai_embeddings_client).

import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import {after, before, describe, test} from 'node:test';
import {fileURLToPath} from 'node:url';

import {Daemon, loadPackage, withDeadline} from './daemon.mjs';

const PACELINED = process.env.PACELINED ?? '';
const SHARED = process.env.PACELINE_SHARED_DIR ?? '/nonexistent';
const MODULES = process.env.PACELINE_NODE_MODULES ?? '';
const ORACLE = path.join(SHARED, 'oracle', 'models', 'qwen3-base-f32.gguf');
const STORIES = path.join(SHARED, 'models', 'stories260K.gguf');
const HERE = path.dirname(fileURLToPath(import.meta.url));
const REFERENCE = JSON.parse(fs.readFileSync(
    path.join(HERE, '..', 'engine', 'cpu', 'data',
              'embedding_reference.json'),
    'utf8'));
const KEY = 'embed-node-key';
const EOS = 2;  // the oracle qwen3 file's tokenizer.ggml.eos_token_id
const WAIT_MS = 20000;

const HAVE_MODELS = fs.existsSync(ORACLE) && fs.existsSync(STORIES);
if (!HAVE_MODELS) console.log(`PACELINE_SKIP: no ${ORACLE} or ${STORIES}`);

function loadSdk() {
  return loadPackage(MODULES, 'openai', 'openai_node_modules');
}

// A GGUF string (u64 length, bytes) and a metadata entry.
function ggufString(s) {
  const len = Buffer.alloc(8);
  len.writeBigUInt64LE(BigInt(Buffer.byteLength(s)));
  return Buffer.concat([len, Buffer.from(s, 'utf8')]);
}
function u32(v) {
  const b = Buffer.alloc(4);
  b.writeUInt32LE(v);
  return b;
}

// `gguf` with `key` = uint32 `value` inserted after the header, padded by a
// string entry to a multiple of the file's alignment (32: the file names
// none), so the tensor data keeps its offsets.
function withUint32Key(gguf, key, value) {
  return withKey(gguf, key, 4, u32(value));
}

// ... `key` = bool `value` (GGUF type 7, one byte).
function withBoolKey(gguf, key, value) {
  return withKey(gguf, key, 7, Buffer.from([value ? 1 : 0]));
}

function withKey(gguf, key, type, valueBytes) {
  const entry = Buffer.concat([ggufString(key), u32(type), valueBytes]);
  const padKey = `general.paceline_test_padding.${key}`;  // one per key
  const bare = ggufString(padKey).length + 4 + 8;
  const pad = (32 - ((entry.length + bare) % 32)) % 32;
  const padding =
      Buffer.concat([ggufString(padKey), u32(8), ggufString(' '.repeat(pad))]);
  const header = Buffer.from(gguf.subarray(0, 24));
  header.writeBigUInt64LE(header.readBigUInt64LE(16) + 2n, 16);
  return Buffer.concat([header, entry, padding, gguf.subarray(24)]);
}

function cosine(a, b) {
  let dot = 0;
  for (let i = 0; i < a.length; ++i) dot += a[i] * b[i];
  return dot;
}

function assertLike(got, want, what) {
  assert.equal(got.length, want.length, `${what}: length`);
  assert.ok(cosine(got, want) > 0.9999, `${what}: cosine ${cosine(got, want)}`);
}

async function start(model) {
  const daemon = new Daemon(PACELINED, ['--model', model,
                                        '--tenant', `alice:${KEY}`]);
  try {
    return await daemon.ready();
  } catch (e) {
    await daemon.kill();
    throw e;
  }
}

describe('embeddings through the OpenAI Node SDK', {skip: !HAVE_MODELS}, () => {
  let dir, embedder, generator, client, modelId;

  before(async () => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'paceline-embed-'));
    const model = path.join(dir, 'qwen3-embedding-test.gguf');
    fs.writeFileSync(
        model, withUint32Key(fs.readFileSync(ORACLE), 'qwen3.pooling_type', 3));
    embedder = await start(model);
    generator = await start(STORIES);
    const OpenAI = loadSdk().default;
    client = new OpenAI({baseURL: embedder.baseURL, apiKey: KEY, maxRetries: 0});
    modelId = (await client.models.list()).data[0].id;
  });

  after(async () => {
    if (embedder) await embedder.kill();
    if (generator) await generator.kill();
    if (dir) fs.rmSync(dir, {recursive: true, force: true});
  });

  const create = (params) =>
      withDeadline(client.embeddings.create(params), WAIT_MS, 'embeddings');

  test('lists of token ids, as floats, are llama.cpp\'s embeddings', async () => {
    const r = await create({model: modelId, input: REFERENCE.prompts,
                            encoding_format: 'float'});
    assert.equal(r.object, 'list');
    assert.equal(r.model, modelId);
    assert.equal(r.data.length, 2);
    const tokens = REFERENCE.prompts[0].length + REFERENCE.prompts[1].length;
    assert.deepEqual(r.usage, {prompt_tokens: tokens, total_tokens: tokens});
    r.data.forEach((d, i) => {
      assert.equal(d.object, 'embedding');
      assert.equal(d.index, i);
      assert.ok(Array.isArray(d.embedding));
      assertLike(d.embedding, REFERENCE.last[i], `input ${i}`);
    });
  });

  test('the SDK\'s default (base64, decoded by the SDK)', async () => {
    const r = await create({model: modelId, input: REFERENCE.prompts[1]});
    assert.equal(r.data.length, 1);
    // The SDK decoded the base64 it asked for into numbers (a float array
    // from the server would not decode).
    assert.ok(Array.isArray(r.data[0].embedding));
    assertLike(r.data[0].embedding, REFERENCE.last[1], 'default format');
  });

  test('base64 is little-endian float32', async () => {
    const r = await create({model: modelId, input: REFERENCE.prompts[0],
                            encoding_format: 'base64'});
    const b = Buffer.from(r.data[0].embedding, 'base64');
    assert.equal(b.length, 4 * REFERENCE.last[0].length);
    const v = [];
    for (let i = 0; i < b.length; i += 4) v.push(b.readFloatLE(i));
    assertLike(v, REFERENCE.last[0], 'base64');
  });

  test('texts are embedded as their tokens', async () => {
    const texts = ['Once upon a time', 'The little dog ran home.'];
    const r = await create({model: modelId, input: texts,
                            encoding_format: 'float'});
    assert.equal(r.data.length, 2);
    for (let i = 0; i < texts.length; ++i) {
      const t = await fetch(`http://127.0.0.1:${embedder.port}/tokenize`, {
        method: 'POST',
        headers: {'Authorization': `Bearer ${KEY}`,
                  'Content-Type': 'application/json'},
        body: JSON.stringify({prompt: texts[i]}),
      });
      const ids = (await t.json()).tokens;
      const byIds = await create({model: modelId, input: ids,
                                  encoding_format: 'float'});
      assert.deepEqual(r.data[i].embedding, byIds.data[0].embedding);
      const norm = Math.sqrt(cosine(r.data[i].embedding, r.data[i].embedding));
      assert.ok(Math.abs(norm - 1) < 1e-5, `norm ${norm}`);
    }
    const one = await create({model: modelId, input: texts[0],
                              encoding_format: 'float'});
    assert.deepEqual(one.data[0].embedding, r.data[0].embedding);
  });

  test('add_eos_token: a text ends with the EOS, as llama.cpp embeds it',
       async () => {
    // Qwen3-Embedding's files say add_eos_token: llama.cpp's server then
    // appends the EOS to each text, and last pooling takes its row.
    const model = path.join(dir, 'qwen3-embedding-eos.gguf');
    fs.writeFileSync(model, withBoolKey(
        fs.readFileSync(path.join(dir, 'qwen3-embedding-test.gguf')),
        'tokenizer.ggml.add_eos_token', true));
    const eos = await start(model);
    try {
      const OpenAI = loadSdk().default;
      const c = new OpenAI({baseURL: eos.baseURL, apiKey: KEY, maxRetries: 0});
      const text = 'Once upon a time';
      const t = await fetch(`http://127.0.0.1:${eos.port}/tokenize`, {
        method: 'POST',
        headers: {'Authorization': `Bearer ${KEY}`,
                  'Content-Type': 'application/json'},
        body: JSON.stringify({prompt: text}),
      });
      const ids = (await t.json()).tokens;
      const id = (await c.models.list()).data[0].id;
      const embed = (input) => withDeadline(
          c.embeddings.create({model: id, input, encoding_format: 'float'}),
          WAIT_MS, 'embeddings');
      const byText = await embed(text);
      const withEos = await embed([...ids, EOS]);
      assert.equal(byText.usage.prompt_tokens, ids.length + 1);
      assert.deepEqual(byText.data[0].embedding, withEos.data[0].embedding);
      const without = await embed(ids);
      assert.notDeepEqual(byText.data[0].embedding, without.data[0].embedding);
    } finally {
      await eos.kill();
    }
  });

  test('dimensions: the model\'s width only', async () => {
    const r = await create({model: modelId, input: [1, 2, 3], dimensions: 256,
                            encoding_format: 'float'});
    assert.equal(r.data[0].embedding.length, 256);
    const OpenAI = loadSdk().default;
    await assert.rejects(
        create({model: modelId, input: [1, 2, 3], dimensions: 64}),
        (e) => e instanceof OpenAI.BadRequestError && e.param === 'dimensions');
    await assert.rejects(create({model: modelId, input: ''}),
                         (e) => e instanceof OpenAI.BadRequestError);
  });

  test('a generation model answers 400 naming why', async () => {
    const OpenAI = loadSdk().default;
    const stories = new OpenAI({baseURL: generator.baseURL, apiKey: KEY,
                                maxRetries: 0});
    await assert.rejects(
        withDeadline(stories.embeddings.create({model: 'stories260K',
                                                input: 'Once upon a time'}),
                     WAIT_MS, 'embeddings'),
        (e) => e instanceof OpenAI.BadRequestError && e.status === 400 &&
            /no pooling type/.test(e.message) &&
            /generation model/.test(e.message));
  });
});
