// POST /v1/responses (OpenAI's Responses API, stateless) through real
// clients against the real pacelined, their packages pinned by
// package-lock.json:
//  - the official OpenAI Node SDK (`openai`): responses.create whole and
//    streamed (the typed events, and the SDK's responses.stream helper,
//    which rebuilds the response from them), the same greedy text as chat
//    completions, a function tool round trip (tool_choice "required" forces
//    the call, then the function_call and function_call_output items go
//    back as input), text.format json_schema, and the stateless refusals;
//  - the OpenAI Agents SDK (`@openai/agents`) with its default Responses
//    model and with OpenAIChatCompletionsModel: an agent whose one tool is
//    called (modelSettings.toolChoice "required"; the SDK then resets the
//    choice to auto) and whose output reaches the next turn;
//  - LangChain.js `ChatOpenAI` (`@langchain/openai`) with
//    useResponsesApi: a reply, and a bound tool's call and result.
// stories260K writes no tool calls by itself, so every call here is forced
// (tool_choice required, a strict tool: the grammar holds the arguments to
// the schema), with Mistral Nemo's template, on a copy of the model whose
// context is 2048 positions. Every wait has a deadline.
//
// Environment as openai_client.test.mjs (ctest openai_responses_clients sets
// it); without the model every test is skipped ("PACELINE_SKIP:").

import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import {after, before, describe, test} from 'node:test';

import {Daemon, loadPackage, withDeadline} from './daemon.mjs';

const PACELINED = process.env.PACELINED ?? '';
const SHARED = process.env.PACELINE_SHARED_DIR ?? '/nonexistent';
const MODEL = path.join(SHARED, 'models', 'stories260K.gguf');
const TEMPLATE = path.join(
    SHARED, 'chat_templates', 'mistralai-Mistral-Nemo-Instruct-2407.jinja');
const MODULES = process.env.PACELINE_NODE_MODULES ?? '';

const HAVE_MODEL = fs.existsSync(MODEL) && fs.existsSync(TEMPLATE);
if (!HAVE_MODEL) console.log(`PACELINE_SKIP: no ${MODEL} or ${TEMPLATE}`);

// A copy of stories260K whose llama.context_length is `positions` (the
// Agents SDK's tool schemas and turns pass 512; the model's RoPE runs at any
// position, and only the prompt's fit is tested here). GGUF metadata:
// the key (u64 length + bytes), a u32 value type (4 = UINT32), the value.
function biggerContextModel(dir, positions) {
  const bytes = fs.readFileSync(MODEL);
  const key = Buffer.from('llama.context_length');
  const at = bytes.indexOf(key);
  assert.ok(at > 8, 'no llama.context_length in the GGUF');
  assert.equal(bytes.readBigUInt64LE(at - 8), BigInt(key.length));
  assert.equal(bytes.readUInt32LE(at + key.length), 4);
  bytes.writeUInt32LE(positions, at + key.length + 4);
  const out = path.join(dir, 'stories260K-long.gguf');
  fs.writeFileSync(out, bytes);
  return out;
}

const KEY = 'responses-node-key';
let MODEL_ID = '';  // what GET /v1/models serves, read in before()
const WAIT_MS = 30000;

// A package from the build tree (CommonJS builds; an ES import cannot use
// NODE_PATH).
function load(name) {
  return loadPackage(MODULES, name, 'openai_node_modules');
}

// The strict tool every forced call uses: short, bounded arguments.
const WEATHER_PARAMS = {
  type: 'object', additionalProperties: false, required: ['city', 'unit'],
  properties: {city: {type: 'string', maxLength: 6},
               unit: {type: 'string', enum: ['c', 'f']}},
};
const WEATHER_TOOL = {type: 'function', name: 'get_weather', strict: true,
                      description: 'Weather', parameters: WEATHER_PARAMS};

function checkWeatherArgs(text) {
  const args = JSON.parse(text);
  assert.deepEqual(Object.keys(args).sort(), ['city', 'unit'], text);
  assert.ok(['c', 'f'].includes(args.unit), text);
  return args;
}

// Every event of an SDK stream, within a deadline.
async function collect(stream, ms = WAIT_MS) {
  const events = [];
  await withDeadline((async () => {
    for await (const e of stream) events.push(e);
  })(), ms, 'stream');
  return events;
}

describe('Responses API against pacelined', {skip: !HAVE_MODEL}, () => {
  let daemon, OpenAI, client, tmp;

  before(async () => {
    ({OpenAI} = load('openai'));
    tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'paceline-responses-'));
    daemon = new Daemon(PACELINED, [
      '--model', biggerContextModel(tmp, 2048),
      '--chat-template-file', TEMPLATE,
      '--tenant', `alice:${KEY}`,
    ]);
    try {
      await daemon.ready();
    } catch (e) {
      await daemon.kill();
      throw e;
    }
    client = new OpenAI({baseURL: daemon.baseURL, apiKey: KEY, maxRetries: 0});
    const models = await withDeadline(client.models.list(), WAIT_MS, 'models');
    MODEL_ID = models.data[0].id;
  });

  after(async () => {
    if (daemon) await daemon.kill();
    if (tmp) fs.rmSync(tmp, {recursive: true, force: true});
  });

  const create = (params) =>
      withDeadline(client.responses.create(params), WAIT_MS, 'responses');

  describe('openai SDK', () => {
    test('greedy text equals chat completions, with usage', async () => {
      const r = await create({model: MODEL_ID, input: 'Hi',
                              max_output_tokens: 16, temperature: 0});
      const chat = await withDeadline(client.chat.completions.create({
        model: MODEL_ID, messages: [{role: 'user', content: 'Hi'}],
        max_tokens: 16, temperature: 0}), WAIT_MS, 'chat');
      assert.equal(r.object, 'response');
      assert.match(r.id, /^resp_[0-9a-f]{16}$/);
      assert.equal(r.model, MODEL_ID);
      assert.equal(r.output.length, 1);
      const msg = r.output[0];
      assert.equal(msg.type, 'message');
      assert.equal(msg.role, 'assistant');
      assert.match(msg.id, /^msg_/);
      assert.equal(msg.content[0].type, 'output_text');
      assert.equal(r.output_text, chat.choices[0].message.content);
      assert.ok(r.output_text.length > 0);
      // Cut at 16 tokens, or ended by itself.
      if (chat.choices[0].finish_reason === 'length') {
        assert.equal(r.status, 'incomplete');
        assert.equal(r.incomplete_details.reason, 'max_output_tokens');
      } else {
        assert.equal(r.status, 'completed');
      }
      assert.equal(r.usage.input_tokens, chat.usage.prompt_tokens);
      assert.equal(r.usage.output_tokens, chat.usage.completion_tokens);
      assert.equal(r.usage.total_tokens,
                   r.usage.input_tokens + r.usage.output_tokens);
      assert.equal(typeof r.usage.input_tokens_details.cached_tokens,
                   'number');
      assert.equal(r.usage.output_tokens_details.reasoning_tokens, 0);
      assert.equal(r.max_output_tokens, 16);
      assert.equal(r.store, false);
    });

    test('instructions reach the prompt', async () => {
      const params = {model: MODEL_ID, input: 'Hi', max_output_tokens: 2,
                      temperature: 0};
      const plain = await create(params);
      const told = await create({...params, instructions: 'Be kind to all.'});
      assert.ok(told.usage.input_tokens > plain.usage.input_tokens,
                `${told.usage.input_tokens} <= ${plain.usage.input_tokens}`);
      assert.equal(told.instructions, 'Be kind to all.');
    });

    test('streamed events rebuild the whole answer', async () => {
      const params = {model: MODEL_ID, input: 'Hi', max_output_tokens: 12,
                      temperature: 0};
      const whole = await create(params);
      const events = await collect(await client.responses.create(
          {...params, stream: true}));
      const types = events.map((e) => e.type);
      assert.deepEqual(types.slice(0, 4), [
        'response.created', 'response.in_progress',
        'response.output_item.added', 'response.content_part.added']);
      assert.deepEqual(types.slice(-4), [
        'response.output_text.done', 'response.content_part.done',
        'response.output_item.done', `response.${whole.status}`]);
      events.forEach((e, i) => assert.equal(e.sequence_number, i));
      const deltas = events.filter((e) => e.type === 'response.output_text.delta');
      assert.ok(deltas.length >= 1);
      const itemId = events[2].item.id;
      for (const d of deltas) {
        assert.equal(d.item_id, itemId);
        assert.equal(d.output_index, 0);
        assert.equal(d.content_index, 0);
      }
      assert.equal(deltas.map((d) => d.delta).join(''), whole.output_text);
      const last = events.at(-1).response;
      assert.equal(last.output[0].content[0].text, whole.output_text);
      assert.equal(last.usage.output_tokens, whole.usage.output_tokens);

      // The SDK's helper accumulates the same events into a Response.
      const stream = client.responses.stream(params);
      const final = await withDeadline(stream.finalResponse(), WAIT_MS,
                                       'responses.stream');
      assert.equal(final.output[0].content[0].text, whole.output_text);
    });

    test('a forced function call, then its output as the next input',
         async () => {
      const first = await create({
        model: MODEL_ID, input: 'Weather?', tools: [WEATHER_TOOL],
        tool_choice: 'required', parallel_tool_calls: false,
        max_output_tokens: 120, temperature: 1, top_p: 0.9});
      assert.equal(first.status, 'completed');
      const calls = first.output.filter((i) => i.type === 'function_call');
      assert.equal(calls.length, 1, JSON.stringify(first.output));
      const call = calls[0];
      assert.equal(call.name, 'get_weather');
      assert.match(call.id, /^fc_/);
      assert.ok(call.call_id.length > 0);
      assert.equal(call.status, 'completed');
      const args = checkWeatherArgs(call.arguments);

      // Stateless: the whole conversation goes back as input.
      const result = `{"city":${JSON.stringify(args.city)},"temp":21}`;
      const second = await create({
        model: MODEL_ID, tools: [WEATHER_TOOL], max_output_tokens: 8,
        temperature: 0, input: [
          {role: 'user', content: 'Weather?'},
          ...first.output,
          {type: 'function_call_output', call_id: call.call_id,
           output: result},
        ]});
      assert.ok(['completed', 'incomplete'].includes(second.status));
      // The call and its result are in the prompt.
      assert.ok(second.usage.input_tokens >
                    first.usage.input_tokens + 10,
                `${second.usage.input_tokens} vs ${first.usage.input_tokens}`);
    });

    test('a streamed call: argument deltas and done events', async () => {
      const events = await collect(await client.responses.create({
        model: MODEL_ID, input: 'Weather?', tools: [WEATHER_TOOL],
        tool_choice: {type: 'function', name: 'get_weather'},
        max_output_tokens: 120, temperature: 1, stream: true}));
      const added = events.find((e) => e.type === 'response.output_item.added' &&
                                       e.item.type === 'function_call');
      assert.ok(added, JSON.stringify(events.map((e) => e.type)));
      assert.equal(added.item.name, 'get_weather');
      const deltas = events.filter(
          (e) => e.type === 'response.function_call_arguments.delta');
      const done = events.find(
          (e) => e.type === 'response.function_call_arguments.done');
      assert.ok(done);
      assert.equal(done.item_id, added.item.id);
      assert.equal(deltas.map((d) => d.delta).join(''), done.arguments);
      checkWeatherArgs(done.arguments);
      const completed = events.at(-1);
      assert.equal(completed.type, 'response.completed');
      const item = completed.response.output.find(
          (i) => i.type === 'function_call');
      assert.equal(item.call_id, added.item.call_id);
      assert.equal(item.arguments, done.arguments);
    });

    test('text.format json_schema holds the output to the schema',
         async () => {
      for (let seed = 1; seed <= 5; ++seed) {
        const r = await create({
          model: MODEL_ID, input: 'Name a pet.', max_output_tokens: 40,
          temperature: 1, seed,
          text: {format: {type: 'json_schema', name: 'pet', strict: true,
                          schema: {type: 'object', additionalProperties: false,
                                   required: ['name'],
                                   properties: {name: {type: 'string',
                                                       maxLength: 8}}}}}});
        assert.equal(r.status, 'completed', `seed ${seed}`);
        const value = JSON.parse(r.output_text);
        assert.deepEqual(Object.keys(value), ['name']);
        assert.ok([...value.name].length <= 8, r.output_text);
      }
    });

    test('stored state is refused: previous_response_id, retrieve',
         async () => {
      let error = null;
      try {
        await create({model: MODEL_ID, input: 'Hi',
                      previous_response_id: 'resp_0000000000000001'});
      } catch (e) {
        error = e;
      }
      assert.ok(error instanceof OpenAI.BadRequestError, `${error}`);
      assert.equal(error.param, 'previous_response_id');
      assert.match(error.message, /stateless/);
      assert.match(error.message, /input/);
      error = null;
      try {
        await withDeadline(client.responses.retrieve('resp_0000000000000001'),
                           WAIT_MS, 'retrieve');
      } catch (e) {
        error = e;
      }
      assert.ok(error instanceof OpenAI.NotFoundError, `${error}`);
      // store: true, the SDK's usual default, is answered (nothing kept).
      const r = await create({model: MODEL_ID, input: 'Hi', store: true,
                              max_output_tokens: 2});
      assert.equal(r.store, false);
    });
  });

  describe('OpenAI Agents SDK', () => {
    let agents, z;

    before(() => {
      agents = load('@openai/agents');
      ({z} = load('zod'));
      agents.setTracingDisabled(true);
      agents.setDefaultOpenAIClient(new (load('openai').OpenAI)(
          {baseURL: daemon.baseURL, apiKey: KEY, maxRetries: 0}));
    });

    // Runs an agent whose one tool is forced on its first turn; the SDK
    // resets tool_choice after the call, so the second turn answers in
    // text with the tool's output in its prompt.
    async function runWeatherAgent(model, options = {}, agentOptions = {}) {
      const seen = [];
      const weather = agents.tool({
        name: 'get_weather', description: 'Weather',
        parameters: z.object({city: z.string().max(6),
                              unit: z.enum(['c', 'f'])}),
        execute: async (args) => {
          seen.push(args);
          return `It is 21 degrees in ${args.city}.`;
        },
      });
      const agent = new agents.Agent({
        name: 'weather', instructions: 'Answer briefly.', model,
        tools: [weather],
        modelSettings: {toolChoice: 'required', temperature: 0.8,
                        maxTokens: 120, parallelToolCalls: false},
        ...agentOptions,
      });
      const result = await withDeadline(
          agents.run(agent, 'Weather?', {maxTurns: 3, ...options}),
          WAIT_MS * 2, 'agent run');
      if (options.stream) {
        await withDeadline(result.completed, WAIT_MS * 2, 'agent stream');
      }
      return {result, seen};
    }

    function checkRun({result, seen}) {
      assert.equal(seen.length, 1, JSON.stringify(seen));
      assert.ok(['c', 'f'].includes(seen[0].unit));
      const types = result.newItems.map((i) => i.type);
      assert.deepEqual(types.slice(0, 2),
                       ['tool_call_item', 'tool_call_output_item'],
                       JSON.stringify(types));
      const call = result.newItems[0].rawItem;
      const output = result.newItems[1].rawItem;
      assert.equal(output.callId, call.callId);
      assert.equal(result.rawResponses.length, 2);
      // The tool's output went into the second turn's prompt.
      const [u1, u2] = result.rawResponses.map((r) => r.usage.inputTokens);
      assert.ok(u2 > u1 + 10, `${u2} vs ${u1}`);
      assert.equal(typeof result.finalOutput, 'string');
    }

    test('Responses model (the default provider)', async () => {
      checkRun(await runWeatherAgent(MODEL_ID));
    });

    // The SDK's streamed run wants response.completed from every turn; a
    // free-text turn of stories260K usually runs into maxTokens
    // (response.incomplete), so this run stops at the tool's output.
    test('Responses model, streamed, stopping on the tool', async () => {
      const {result, seen} = await runWeatherAgent(
          MODEL_ID, {stream: true}, {toolUseBehavior: 'stop_on_first_tool'});
      assert.equal(seen.length, 1);
      assert.equal(result.finalOutput, `It is 21 degrees in ${seen[0].city}.`);
      const types = result.newItems.map((i) => i.type);
      assert.deepEqual(types, ['tool_call_item', 'tool_call_output_item']);
      assert.equal(result.rawResponses.length, 1);
      assert.equal(result.newItems[0].rawItem.name, 'get_weather');
    });

    test('Chat Completions model', async () => {
      const openai = new (load('openai').OpenAI)(
          {baseURL: daemon.baseURL, apiKey: KEY, maxRetries: 0});
      checkRun(await runWeatherAgent(
          new agents.OpenAIChatCompletionsModel(openai, MODEL_ID)));
    });
  });

  describe('LangChain ChatOpenAI with useResponsesApi', () => {
    let ChatOpenAI, messages;

    before(() => {
      ({ChatOpenAI} = load('@langchain/openai'));
      messages = load('@langchain/core/messages');
    });

    const model = (options = {}) => new ChatOpenAI({
      model: MODEL_ID, apiKey: KEY, useResponsesApi: true, maxRetries: 0,
      configuration: {baseURL: daemon.baseURL}, ...options});

    test('a reply, with usage', async () => {
      const reply = await withDeadline(
          model({temperature: 0, maxTokens: 12}).invoke('Hi'), WAIT_MS,
          'invoke');
      const direct = await create({model: MODEL_ID, input: 'Hi',
                                   max_output_tokens: 12, temperature: 0});
      assert.equal(reply.text, direct.output_text);
      assert.equal(reply.usage_metadata.input_tokens,
                   direct.usage.input_tokens);
      assert.equal(reply.usage_metadata.output_tokens,
                   direct.usage.output_tokens);
    });

    test('a bound tool is called and its result answered', async () => {
      const tools = [{type: 'function', function: {
        name: 'get_weather', description: 'Weather',
        parameters: WEATHER_PARAMS}}];
      // bindTools' tool_choice does not reach this version's Responses
      // request body (it sends none); modelKwargs carries it.
      const bound = model({temperature: 0.8, maxTokens: 120,
                           modelKwargs: {tool_choice: 'required'}})
                        .bindTools(tools, {strict: true,
                                           parallel_tool_calls: false});
      const human = new messages.HumanMessage('Weather?');
      const ai = await withDeadline(bound.invoke([human]), WAIT_MS, 'call');
      assert.equal(ai.tool_calls.length, 1, JSON.stringify(ai.tool_calls));
      const call = ai.tool_calls[0];
      assert.equal(call.name, 'get_weather');
      assert.ok(['c', 'f'].includes(call.args.unit));
      const answer = await withDeadline(
          model({temperature: 0, maxTokens: 8}).bindTools(tools).invoke([
            human, ai,
            new messages.ToolMessage(
                {tool_call_id: call.id, content: 'It is 21 degrees.'}),
          ]),
          WAIT_MS, 'answer');
      // The call and its result are in the prompt.
      assert.ok(answer.usage_metadata.input_tokens >
                    ai.usage_metadata.input_tokens + 10,
                `${answer.usage_metadata.input_tokens} vs ` +
                    `${ai.usage_metadata.input_tokens}`);
      assert.equal(typeof answer.text, 'string');
    });
  });
});
