// The Vercel AI SDK's generateObject (npm `ai` with
// `@ai-sdk/openai-compatible` and a `zod` schema, the versions
// package-lock.json pins) against the real pacelined serving stories260K.
// The provider is told the server supports structured outputs, so the SDK
// sends the zod schema as response_format json_schema (strict) on
// /v1/chat/completions and validates the answer against the schema itself.
// A 260K-parameter TinyStories model writes stories, never this JSON: only
// the daemon's grammar makes the answers valid, and a control request
// without response_format checks that the model alone fails the schema.
//
// Environment (ctest vercel_ai_generate_object sets them all):
//   PACELINED              the daemon binary
//   PACELINE_SHARED_DIR    holds models/stories260K.gguf and chat_templates/
//   PACELINE_NODE_MODULES  where `npm ci` installed the packages
// Without the model every test is skipped and "PACELINE_SKIP:" is printed
// (ctest's SKIP_REGULAR_EXPRESSION); missing packages are a failure.

import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import {after, before, describe, test} from 'node:test';

import {Daemon, loadPackage, withDeadline} from './daemon.mjs';

const PACELINED = process.env.PACELINED ?? '';
const SHARED = process.env.PACELINE_SHARED_DIR ?? '/nonexistent';
const MODEL = path.join(SHARED, 'models', 'stories260K.gguf');
const TEMPLATE =
    path.join(SHARED, 'chat_templates', 'Qwen-Qwen2.5-7B-Instruct.jinja');
const MODULES = process.env.PACELINE_NODE_MODULES ?? '';

const HAVE_MODEL = fs.existsSync(MODEL) && fs.existsSync(TEMPLATE);
if (!HAVE_MODEL) console.log(`PACELINE_SKIP: no ${MODEL} or ${TEMPLATE}`);

const KEY = 'vercel-node-key';
const MODEL_ID = 'stories260K';  // GET /v1/models: the file's base name
const PROMPT = 'Tell me about a pet.';
const SEEDS = [1, 2, 3, 4, 5, 6, 7, 8, 9, 10];
// The longest answer the schema allows, even with every character a
// \uXXXX escape, stays well inside this (and stories260K's 512 positions).
const MAX_TOKENS = 256;
const WAIT_MS = 30000;  // one request's deadline

// A package from the build tree (an ES import cannot use NODE_PATH).
function load(name) {
  return loadPackage(MODULES, name, 'openai_node_modules');
}

// Bounded by the schema alone: an enum, an integer range, a string and a
// required array with maximum lengths.
function petSchema(z) {
  return z.object({
    pet: z.enum(['cat', 'dog', 'bird']),
    age: z.number().int().min(0).max(12),
    name: z.string().max(8),
    toys: z.array(z.string().max(6)).max(3),
  });
}

describe('Vercel AI SDK generateObject against pacelined',
         {skip: !HAVE_MODEL}, () => {
  let ai, schema, daemon, model;

  before(async () => {
    ai = load('ai');
    const {createOpenAICompatible} = load('@ai-sdk/openai-compatible');
    schema = petSchema(load('zod').z);
    daemon = new Daemon(PACELINED, [
      '--model', MODEL, '--chat-template-file', TEMPLATE,
      '--tenant', `alice:${KEY}`,
    ]);
    try {
      await daemon.ready();
    } catch (e) {
      await daemon.kill();
      daemon = null;
      throw e;
    }
    const provider = createOpenAICompatible({
      name: 'paceline', baseURL: daemon.baseURL, apiKey: KEY,
      supportsStructuredOutputs: true,
    });
    model = provider.chatModel(MODEL_ID);
  });

  after(async () => {
    if (daemon) await daemon.kill();
  });

  const generate = (seed) => withDeadline(ai.generateObject({
    model, schema, schemaName: 'pet', prompt: PROMPT, seed, temperature: 1,
    maxOutputTokens: MAX_TOKENS, maxRetries: 0,
  }), WAIT_MS, `generateObject seed ${seed}`);

  test('without response_format the model fails the schema', async () => {
    // The same request the SDK makes, minus the schema: free text.
    const r = await withDeadline(fetch(`${daemon.baseURL}/chat/completions`, {
      method: 'POST',
      headers: {'Authorization': `Bearer ${KEY}`,
                'Content-Type': 'application/json'},
      body: JSON.stringify({
        model: MODEL_ID, messages: [{role: 'user', content: PROMPT}],
        max_tokens: MAX_TOKENS, temperature: 1, seed: SEEDS[0],
      }),
    }), WAIT_MS, 'free chat completion');
    assert.equal(r.status, 200);
    const text = (await r.json()).choices[0].message.content;
    let parsed;
    try {
      parsed = JSON.parse(text);
    } catch {
      return;  // not even JSON
    }
    assert.ok(!schema.safeParse(parsed).success,
              `the model alone matched the schema: ${text}`);
  });

  test('every seed gives an object the zod schema accepts', async () => {
    const objects = [];
    for (const seed of SEEDS) {
      // generateObject throws NoObjectGeneratedError unless the answer
      // parses and the schema accepts it.
      const r = await generate(seed);
      const body = typeof r.request.body === 'string' ?
          JSON.parse(r.request.body) : r.request.body;
      assert.equal(body.response_format?.type, 'json_schema',
                   JSON.stringify(body));
      assert.equal(body.response_format.json_schema.strict, true);
      assert.equal(body.seed, seed);
      assert.equal(body.temperature, 1);
      assert.ok(schema.safeParse(r.object).success, JSON.stringify(r.object));
      assert.equal(r.finishReason, 'stop', `seed ${seed}`);
      assert.ok(r.usage.inputTokens > 0, JSON.stringify(r.usage));
      assert.ok(r.usage.outputTokens > 0, JSON.stringify(r.usage));
      objects.push(JSON.stringify(r.object));
    }
    // The seeds reach the sampler: the answers differ, and a seed again
    // gives its answer again.
    assert.ok(new Set(objects).size > 1, objects.join('\n'));
    assert.equal(JSON.stringify((await generate(SEEDS[0])).object),
                 objects[0]);
  });
});
