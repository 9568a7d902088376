// The official @anthropic-ai/sdk Node client against sluice's Messages API:
// run by TestAnthropicNodeClient (pkg/messages), which starts the gateway
// and the stand-in providers and gives this script their address, a team
// key, the models (SLUICE_MODELS: one per wire format) and the models that
// fail (SLUICE_LIMITED_MODEL answers 429). It exits non-zero, saying why,
// on the first thing that is not as it should be, and prints "ok".
import Anthropic from '@anthropic-ai/sdk';

const client = new Anthropic({ baseURL: process.env.SLUICE_URL, apiKey: process.env.SLUICE_KEY, maxRetries: 0 });
const models = JSON.parse(process.env.SLUICE_MODELS);
const redPixel = 'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg==';
const tools = [{ name: 'get_weather', description: 'The weather of a city', input_schema: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] } }];

function fail(msg) {
  console.error('FAIL: ' + msg);
  process.exit(1);
}

function check(ok, msg) {
  if (!ok) fail(msg);
}

function text(m) {
  return m.content.filter((b) => b.type === 'text').map((b) => b.text).join('');
}

for (const model of models) {
  for (const streamed of [false, true]) {
    const what = `${model} (streamed: ${streamed})`;
    const send = async (params) => {
      const p = { model, max_tokens: 256, ...params };
      if (!streamed) return client.messages.create(p);
      const s = client.messages.stream(p);
      let events = 0;
      s.on('streamEvent', () => events++);
      const m = await s.finalMessage();
      check(events >= 5, `${what}: ${events} stream events`);
      return m;
    };
    // A greeting.
    let m = await send({ system: 'Be brief.', messages: [{ role: 'user', content: 'Hi' }] });
    check(m.type === 'message' && m.role === 'assistant' && m.id.startsWith('msg_') && text(m).startsWith('Hello from ') && m.stop_reason === 'end_turn',
      `${what}: greeting ${JSON.stringify(m)}`);
    check(m.usage.output_tokens === 7 && m.usage.input_tokens > 0, `${what}: usage ${JSON.stringify(m.usage)}`);
    // An image.
    m = await send({ messages: [{ role: 'user', content: [{ type: 'image', source: { type: 'base64', media_type: 'image/png', data: redPixel } }, { type: 'text', text: 'What is this?' }] }] });
    check(text(m) === 'A red square.', `${what}: image ${JSON.stringify(m)}`);
    // A tool call, its result, the final answer.
    const q = { role: 'user', content: 'Weather in Paris?' };
    m = await send({ messages: [q], tools });
    const call = m.content.find((b) => b.type === 'tool_use');
    check(m.stop_reason === 'tool_use' && call && call.name === 'get_weather' && call.input.city === 'Paris' && call.id,
      `${what}: tool call ${JSON.stringify(m)}`);
    m = await send({ messages: [q, { role: 'assistant', content: m.content }, { role: 'user', content: [{ type: 'tool_result', tool_use_id: call.id, content: '21 degrees' }] }], tools });
    check(text(m) === 'It is 21 degrees in Paris.' && m.stop_reason === 'end_turn', `${what}: final answer ${JSON.stringify(m)}`);
  }
}

// Errors: the SDK's classes, by status, with Anthropic's error types.
const cases = [
  [new Anthropic({ baseURL: process.env.SLUICE_URL, apiKey: 'sk-wrong', maxRetries: 0 }), models[0], {}, Anthropic.AuthenticationError, 'authentication_error'],
  [client, 'nope', {}, Anthropic.NotFoundError, 'not_found_error'],
  [client, process.env.SLUICE_LIMITED_MODEL, {}, Anthropic.RateLimitError, 'rate_limit_error'],
  [client, models[0], { temperature: 3 }, Anthropic.BadRequestError, 'invalid_request_error'],
];
for (const [c, model, extra, cls, type] of cases) {
  for (const streamed of [false, true]) {
    try {
      const p = { model, max_tokens: 10, messages: [{ role: 'user', content: 'Hi' }], ...extra };
      if (streamed) await c.messages.stream(p).finalMessage();
      else await c.messages.create(p);
      fail(`${model}: no error, want ${cls.name}`);
    } catch (e) {
      check(e instanceof cls && e.error?.type === 'error' && e.error?.error?.type === type,
        `${model} (streamed: ${streamed}): ${e.constructor.name} ${JSON.stringify(e.error)}, want ${cls.name} ${type}`);
    }
  }
}

// count_tokens: an estimate, marked as such.
const n = await client.messages.countTokens({ model: models[0], messages: [{ role: 'user', content: 'word '.repeat(100) }] });
check(n.input_tokens > 0 && n.estimated === true, `count_tokens ${JSON.stringify(n)}`);

console.log('ok');
