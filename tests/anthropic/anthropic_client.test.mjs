// The official Anthropic TypeScript SDK (npm `@anthropic-ai/sdk`, the
// version package-lock.json pins) against the real pacelined over its
// Messages API (server/anthropic): messages.create and messages.stream
// (text, the final message), a tool_use -> tool_result round trip,
// messages.countTokens, an error through the SDK's error classes, and the
// three ways a key arrives (apiKey, authToken, an x-api-key header).
//
// Environment (ctest anthropic_node_client sets them all):
//   PACELINED              the daemon binary
//   PACELINE_SHARED_DIR    holds models/stories260K.gguf and chat_templates/
//   PACELINE_NODE_MODULES  where `npm ci` installed the SDK
// Without the model every test is skipped and "PACELINE_SKIP:" is printed
// (ctest's SKIP_REGULAR_EXPRESSION); a missing SDK is a failure.

import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import {after, before, describe, test} from 'node:test';

import {Daemon, loadPackage, rejectsWith as rejectsWithin, withDeadline} from
    '../openai/daemon.mjs';

const PACELINED = process.env.PACELINED ?? '';
const SHARED = process.env.PACELINE_SHARED_DIR ?? '/nonexistent';
const MODEL = path.join(SHARED, 'models', 'stories260K.gguf');
// A template whose tools section leaves stories260K's 512 positions room
// for a tool call and its result (openai_client.test.mjs uses it for
// chat's forced calls): Mistral Nemo's `[TOOL_CALLS][{...}]`, whose ids
// are 9 letters and digits ("toolu_" + those in answers).
const TEMPLATE = path.join(
    SHARED, 'chat_templates', 'mistralai-Mistral-Nemo-Instruct-2407.jinja');
const MODULES = process.env.PACELINE_NODE_MODULES ?? '';

const HAVE_MODEL = fs.existsSync(MODEL) && fs.existsSync(TEMPLATE);
if (!HAVE_MODEL) console.log(`PACELINE_SKIP: no ${MODEL} or ${TEMPLATE}`);

const KEY = 'anthropic-node-key';
let MODEL_ID = '';  // the served model's id (GET /v1/models)
const WAIT_MS = 20000;     // one request's deadline

// The SDK from the build tree (an ES import cannot use NODE_PATH).
function loadSdk() {
  return loadPackage(MODULES, '@anthropic-ai/sdk', 'anthropic_node_modules');
}

// Asserts `promise` rejects with an instance of `cls` with `status` and
// Anthropic's error `type`; returns the error.
async function rejectsWith(promise, cls, status, type) {
  const error = await rejectsWithin(promise, cls, status, WAIT_MS);
  assert.equal(error.error?.type, 'error', JSON.stringify(error.error));
  assert.equal(error.error?.error?.type, type, JSON.stringify(error.error));
  return error;
}

const WEATHER = {
  name: 'get_weather',
  description: 'Weather of a city',
  strict: true,
  input_schema: {
    type: 'object', additionalProperties: false, required: ['city', 'unit'],
    properties: {city: {type: 'string', maxLength: 6},
                 unit: {type: 'string', enum: ['c', 'f']}},
  },
};

// A forced call's checks: one tool_use block with a toolu_ id and input
// valid under WEATHER's schema; returns the block.
function checkToolUse(message) {
  assert.equal(message.stop_reason, 'tool_use', JSON.stringify(message));
  const uses = message.content.filter((b) => b.type === 'tool_use');
  assert.equal(uses.length, 1, JSON.stringify(message.content));
  const use = uses[0];
  assert.match(use.id, /^toolu_[A-Za-z0-9]+$/);
  assert.equal(use.name, 'get_weather');
  assert.equal(typeof use.input, 'object');
  assert.deepEqual(Object.keys(use.input).sort(), ['city', 'unit']);
  assert.ok(['c', 'f'].includes(use.input.unit), JSON.stringify(use.input));
  assert.ok([...use.input.city].length <= 6, JSON.stringify(use.input));
  return use;
}

function totalInput(usage) {
  return usage.input_tokens + (usage.cache_read_input_tokens ?? 0) +
      (usage.cache_creation_input_tokens ?? 0);
}

describe('Anthropic SDK against pacelined', {skip: !HAVE_MODEL}, () => {
  let Anthropic, sdk, daemon, client;

  const HELLO = [{role: 'user', content: 'Once upon a time'}];

  before(async () => {
    sdk = loadSdk();
    Anthropic = sdk.Anthropic ?? sdk.default;
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
    const models = await withDeadline(
        fetch(`http://127.0.0.1:${daemon.port}/v1/models`,
              {headers: {Authorization: `Bearer ${KEY}`}}),
        WAIT_MS, 'models');
    MODEL_ID = (await models.json()).data[0].id;
    // The SDK appends /v1/messages to the base URL itself.
    client = new Anthropic({
      baseURL: `http://127.0.0.1:${daemon.port}`, apiKey: KEY,
      maxRetries: 0,
    });
  });

  after(async () => {
    if (daemon) await daemon.kill();
  });

  test('messages.create: a text Message', async () => {
    const m = await withDeadline(client.messages.create({
      model: MODEL_ID, max_tokens: 16, temperature: 0, messages: HELLO,
      system: 'Tell a story.', metadata: {user_id: 'u1'},
    }), WAIT_MS, 'create');
    assert.match(m.id, /^msg_[0-9a-f]{16}$/);
    assert.equal(m.type, 'message');
    assert.equal(m.role, 'assistant');
    assert.equal(m.model, MODEL_ID);
    assert.equal(m.content.length, 1, JSON.stringify(m.content));
    assert.equal(m.content[0].type, 'text');
    assert.ok(m.content[0].text.length > 0);
    assert.ok(['end_turn', 'max_tokens'].includes(m.stop_reason));
    assert.equal(m.stop_sequence, null);
    assert.ok(m.usage.output_tokens >= 1 && m.usage.output_tokens <= 16,
              JSON.stringify(m.usage));
    assert.ok(totalInput(m.usage) > 5, JSON.stringify(m.usage));
  });

  test('messages.stream: events assemble to the same Message', async () => {
    const params = {model: MODEL_ID, max_tokens: 24, temperature: 0,
                    messages: HELLO};
    const whole = await withDeadline(
        client.messages.create(params), WAIT_MS, 'create');
    // Paced (Paceline's own field), so the text comes in several deltas.
    const stream = client.messages.stream(
        {...params, pace_tokens_per_s: 200, burst_tokens: 1});
    const names = [];
    let text = '';
    stream.on('streamEvent', (e) => names.push(e.type));
    stream.on('text', (delta) => {
      text += delta;
    });
    const final = await withDeadline(stream.finalMessage(), WAIT_MS, 'stream');
    assert.equal(names[0], 'message_start');
    assert.equal(names.at(-1), 'message_stop');
    assert.equal(names.at(-2), 'message_delta');
    assert.ok(names.filter((n) => n === 'content_block_delta').length > 1,
              names.join(' '));
    assert.deepEqual(final.content, whole.content);
    assert.equal(text, whole.content[0].text);
    assert.equal(final.stop_reason, whole.stop_reason);
    assert.equal(final.usage.output_tokens, whole.usage.output_tokens);
    assert.equal(totalInput(final.usage), totalInput(whole.usage));
  });

  test('stop_sequences: stop_reason stop_sequence names it', async () => {
    // The greedy text's second word, as a stop sequence.
    const params = {model: MODEL_ID, max_tokens: 24, temperature: 0,
                    messages: HELLO};
    const whole = await client.messages.create(params);
    const word = whole.content[0].text.trim().split(/\s+/)[1];
    assert.ok(word, whole.content[0].text);
    const m = await withDeadline(
        client.messages.create({...params, stop_sequences: [word]}), WAIT_MS,
        'create');
    assert.equal(m.stop_reason, 'stop_sequence', JSON.stringify(m));
    assert.equal(m.stop_sequence, word);
    assert.ok(!(m.content[0]?.text ?? '').includes(word),
              JSON.stringify(m.content));
  });

  test('tool_choice any forces a tool_use; tool_result goes back', async () => {
    const first = await withDeadline(client.messages.create({
      model: MODEL_ID, max_tokens: 120, temperature: 1, seed: 3,
      messages: [{role: 'user', content: 'Weather?'}], tools: [WEATHER],
      tool_choice: {type: 'any', disable_parallel_tool_use: true},
    }), WAIT_MS, 'forced call');
    const use = checkToolUse(first);

    // The tool_use block and its tool_result reach the template: the
    // prompt grows, and the answer is an ordinary Message.
    const turns = [
      {role: 'user', content: 'Weather?'},
      {role: 'assistant', content: first.content},
      {role: 'user', content: [
        {type: 'tool_result', tool_use_id: use.id, content: '15 C'},
      ]},
    ];
    const second = await withDeadline(client.messages.create({
      model: MODEL_ID, max_tokens: 8, temperature: 0, messages: turns,
      tools: [WEATHER],
    }), WAIT_MS, 'after the tool result');
    assert.equal(second.type, 'message');
    assert.ok(['end_turn', 'max_tokens', 'tool_use'].includes(
        second.stop_reason), second.stop_reason);
    const count = await withDeadline(client.messages.countTokens({
      model: MODEL_ID, messages: turns.slice(0, 1), tools: [WEATHER],
    }), WAIT_MS, 'count');
    assert.ok(totalInput(second.usage) > count.input_tokens,
              `${totalInput(second.usage)} vs ${count.input_tokens}`);
    // An error result is read too.
    const failed = structuredClone(turns);
    failed[2].content[0].is_error = true;
    const third = await withDeadline(client.messages.create({
      model: MODEL_ID, max_tokens: 1, temperature: 0, messages: failed,
      tools: [WEATHER],
    }), WAIT_MS, 'error result');
    assert.ok(totalInput(third.usage) > totalInput(second.usage));
  });

  test('messages.stream: a forced tool_use as input_json_delta', async () => {
    const stream = client.messages.stream({
      model: MODEL_ID, max_tokens: 120, temperature: 1, seed: 5,
      messages: [{role: 'user', content: 'Weather?'}], tools: [WEATHER],
      tool_choice: {type: 'tool', name: 'get_weather'},
    });
    const pieces = [];
    stream.on('inputJson', (partial) => pieces.push(partial));
    const final = await withDeadline(stream.finalMessage(), WAIT_MS, 'stream');
    const use = checkToolUse(final);
    assert.ok(pieces.length >= 1);
    assert.deepEqual(JSON.parse(pieces.join('')), use.input);
  });

  test('output_config.format: the text is JSON under the schema', async () => {
    // Structured outputs (the SDK's OutputConfig.format): a random-weight
    // model writes the object only because the schema holds it.
    const schema = {
      type: 'object',
      properties: {
        city: {type: 'string', maxLength: 12},
        days: {type: 'integer', minimum: 1, maximum: 9},
      },
      required: ['city', 'days'],
      additionalProperties: false,
    };
    for (const seed of [1, 2, 3]) {
      const m = await withDeadline(client.messages.create({
        model: MODEL_ID, max_tokens: 120, temperature: 1, seed,
        messages: [{role: 'user', content: 'Weather?'}],
        output_config: {format: {type: 'json_schema', schema}},
      }), WAIT_MS, 'structured output');
      assert.equal(m.stop_reason, 'end_turn', JSON.stringify(m.content));
      const text = m.content.filter((b) => b.type === 'text')
                       .map((b) => b.text).join('');
      const value = JSON.parse(text);
      assert.deepEqual(Object.keys(value).sort(), ['city', 'days']);
      assert.equal(typeof value.city, 'string');
      assert.ok(value.city.length <= 12, value.city);
      assert.ok(Number.isInteger(value.days) && value.days >= 1 &&
                value.days <= 9, String(value.days));
    }
    await assert.rejects(
        client.messages.create({
          model: MODEL_ID, max_tokens: 4,
          messages: [{role: 'user', content: 'Weather?'}],
          output_config: {format: {type: 'json_object'}},
        }),
        (e) => e instanceof sdk.BadRequestError &&
            /output_config\.format\.type/.test(e.error.error.message));
  });

  test('messages.countTokens: the prompt create is charged for', async () => {
    const params = {model: MODEL_ID, messages: HELLO, system: 'Be brief.'};
    const count = await withDeadline(
        client.messages.countTokens(params), WAIT_MS, 'count');
    assert.deepEqual(Object.keys(count), ['input_tokens']);
    const m = await client.messages.create(
        {...params, max_tokens: 1, temperature: 0});
    assert.equal(count.input_tokens, totalInput(m.usage));
    const longer = await client.messages.countTokens(
        {...params, system: 'Be brief. Be kind. Be quick.'});
    assert.ok(longer.input_tokens > count.input_tokens);
  });

  test('errors: Anthropic error JSON through the SDK classes', async () => {
    // max_tokens is required (the SDK's types say so; plain JS may omit it).
    const e = await rejectsWith(
        client.messages.create({model: MODEL_ID, messages: HELLO}),
        sdk.BadRequestError, 400, 'invalid_request_error');
    assert.match(e.error.error.message, /max_tokens/);
    await rejectsWith(
        client.messages.create(
            {model: 'claude-nope', max_tokens: 4, messages: HELLO}),
        sdk.NotFoundError, 404, 'not_found_error');
    await rejectsWith(
        client.messages.create({model: MODEL_ID, max_tokens: 4, messages: [
          {role: 'user', content: [{type: 'image', source: {
            type: 'base64', media_type: 'image/png', data: 'AA=='}}]},
        ]}),
        sdk.BadRequestError, 400, 'invalid_request_error');
  });

  describe('auth', () => {
    const ask = (c) => withDeadline(
        c.messages.create({model: MODEL_ID, max_tokens: 2, messages: HELLO}),
        WAIT_MS, 'auth request');
    const base = () => `http://127.0.0.1:${daemon.port}`;

    test('authToken (Authorization: Bearer)', async () => {
      const c = new Anthropic({baseURL: base(), authToken: KEY,
                               maxRetries: 0});
      assert.equal((await ask(c)).type, 'message');
    });

    test('an x-api-key header', async () => {
      const c = new Anthropic({baseURL: base(), apiKey: null, authToken: null,
                               defaultHeaders: {'x-api-key': KEY},
                               maxRetries: 0});
      assert.equal((await ask(c)).type, 'message');
      // And without the SDK: the header Anthropic's API documents.
      const r = await withDeadline(fetch(`${base()}/v1/messages`, {
        method: 'POST',
        headers: {'x-api-key': KEY, 'anthropic-version': '2023-06-01',
                  'content-type': 'application/json'},
        body: JSON.stringify(
            {model: MODEL_ID, max_tokens: 2, messages: HELLO}),
      }), WAIT_MS, 'fetch');
      assert.equal(r.status, 200);
      assert.equal((await r.json()).type, 'message');
    });

    test('a wrong key is an AuthenticationError', async () => {
      await rejectsWith(
          ask(new Anthropic({baseURL: base(), apiKey: 'wrong',
                             maxRetries: 0})),
          sdk.AuthenticationError, 401, 'authentication_error');
      await rejectsWith(
          ask(new Anthropic({baseURL: base(), apiKey: null, authToken: null,
                             defaultHeaders: {'x-api-key': 'wrong'},
                             maxRetries: 0})),
          sdk.AuthenticationError, 401, 'authentication_error');
    });
  });
});
