// The official openai Node client against sluice's chat completions: run by
// TestOpenAINodeClient (pkg/chat), which starts the gateway and the stand-in
// providers and gives this script their address, a team key and the cases
// (SLUICE_CASES: each a model, the text it answers and the usage it reports,
// null when the gateway estimates it). It exits non-zero, saying why, on the
// first thing that is not as it should be.
import OpenAI from 'openai';

const client = new OpenAI({ baseURL: process.env.SLUICE_URL + '/v1', apiKey: process.env.SLUICE_KEY, maxRetries: 0 });
const cases = JSON.parse(process.env.SLUICE_CASES);
const messages = [{ role: 'system', content: 'Be brief.' }, { role: 'user', content: 'Hello!' }];

function fail(msg) {
  console.error('FAIL: ' + msg);
  process.exit(1);
}

function check(ok, msg) {
  if (!ok) fail(msg);
}

function checkUsage(what, got, want) {
  check(got && got.total_tokens === got.prompt_tokens + got.completion_tokens && got.total_tokens > 0, `${what}: usage ${JSON.stringify(got)}`);
  if (want) {
    check(got.prompt_tokens === want.prompt_tokens && got.completion_tokens === want.completion_tokens,
      `${what}: usage ${JSON.stringify(got)}, want ${JSON.stringify(want)}`);
  }
}

for (const c of cases) {
  // Not streamed.
  const r = await client.chat.completions.create({ model: c.model, messages });
  const m = r.choices[0].message;
  check(r.object === 'chat.completion' && r.id && r.choices.length === 1 && m.role === 'assistant' && m.content === c.text &&
    r.choices[0].finish_reason === 'stop', `${c.model}: answer ${JSON.stringify(r)}`);
  checkUsage(`${c.model} answer`, r.usage, c.usage);

  // Streamed with the usage chunk asked for: the chunks as they come.
  const s = await client.chat.completions.create({ model: c.model, messages, stream: true, stream_options: { include_usage: true } });
  let text = '';
  let finish = null;
  let last = null;
  let n = 0;
  for await (const ch of s) {
    check(ch.object === 'chat.completion.chunk' && ch.id === (last ?? ch).id, `${c.model}: chunk ${JSON.stringify(ch)}`);
    check(last === null || last.choices.length > 0, `${c.model}: a chunk after the usage chunk: ${JSON.stringify(ch)}`);
    for (const choice of ch.choices) {
      text += choice.delta.content ?? '';
      finish = choice.finish_reason ?? finish;
    }
    last = ch;
    n++;
  }
  check(n > 2 && text === c.text && finish === 'stop', `${c.model}: stream of ${n} chunks says ${JSON.stringify(text)}, finish ${finish}`);
  check(last.choices.length === 0, `${c.model}: the last chunk is not the usage chunk: ${JSON.stringify(last)}`);
  checkUsage(`${c.model} stream`, last.usage, c.usage);

  // Streamed without it, through the client's accumulating helper.
  const runner = client.chat.completions.stream({ model: c.model, messages });
  runner.on('chunk', (ch) => check(ch.choices.length > 0 && !ch.usage, `${c.model}: a usage chunk nobody asked for: ${JSON.stringify(ch)}`));
  const final = await runner.finalChatCompletion();
  check(final.choices[0].message.content === c.text && final.choices[0].finish_reason === 'stop', `${c.model}: accumulated ${JSON.stringify(final)}`);
}

// Tool calls, translated from Anthropic's tool_use blocks, whole and as
// deltas the helper puts back together.
const tools = [
  { type: 'function', function: { name: 'get_weather', parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] } } },
  { type: 'function', function: { name: 'get_time', parameters: { type: 'object', properties: {} } } },
];
function checkCalls(what, choice) {
  const calls = choice.message.tool_calls ?? [];
  check(choice.finish_reason === 'tool_calls' && calls.length === 2 && calls[0].function.name === 'get_weather' &&
    JSON.parse(calls[0].function.arguments).city === 'Paris' && calls[1].function.name === 'get_time' &&
    Object.keys(JSON.parse(calls[1].function.arguments)).length === 0 && calls.every((t) => t.type === 'function' && t.id),
    `${what}: ${JSON.stringify(choice)}`);
}
const toolModel = process.env.SLUICE_TOOL_MODEL;
const answered = await client.chat.completions.create({ model: toolModel, messages, tools });
checkCalls('tool calls', answered.choices[0]);
const streamed = await client.chat.completions.stream({ model: toolModel, messages, tools }).finalChatCompletion();
checkCalls('streamed tool calls', streamed.choices[0]);

// Errors: OpenAI's shape, which the client reads into an APIError.
async function expectError(what, call, status, code, param) {
  try {
    await call();
  } catch (e) {
    check(e instanceof OpenAI.APIError, `${what}: ${e}`);
    check(e.status === status && e.code === code && (e.param ?? '') === param,
      `${what}: ${e.status} ${e.code} ${e.param} (${e.message}), want ${status} ${code} ${param}`);
    return;
  }
  fail(`${what}: no error`);
}
await expectError('unknown model', () => client.chat.completions.create({ model: 'no-such-model', messages }), 404, 'model_not_found', 'model');
await expectError('a part without its object',
  () => client.chat.completions.create({ model: cases[0].model, messages: [{ role: 'user', content: [{ type: 'image_url' }] }] }),
  400, 'missing_required_parameter', 'messages[0].content[0].image_url');
await expectError('a stream refused before it began',
  () => client.chat.completions.create({ model: cases[0].model, messages: [{ role: 'robot', content: 'Hi' }], stream: true }),
  400, 'invalid_value', 'messages[0].role');

// A provider error in the middle of a stream: the text before it, then the
// error event, which the client throws.
const broken = await client.chat.completions.create({ model: process.env.SLUICE_BROKEN_MODEL, messages, stream: true });
let before = '';
try {
  for await (const ch of broken) {
    before += ch.choices[0]?.delta.content ?? '';
  }
  fail('the broken stream ended without an error');
} catch (e) {
  check(e instanceof OpenAI.APIError && /Overloaded/.test(e.message) && before === 'Hello', `broken stream: ${e} after ${JSON.stringify(before)}`);
}

console.log('ok');
