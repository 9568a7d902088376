// The official openai Node client against sluice's Batch API: run by
// TestOpenAINodeClient (pkg/batches), which starts the gateway and the
// stand-in providers and gives this script their address and a team key.
// It exits non-zero, saying why, on the first thing that is not as it
// should be.
import OpenAI, { toFile } from 'openai';

const client = new OpenAI({ baseURL: process.env.SLUICE_URL + '/v1', apiKey: process.env.SLUICE_KEY, maxRetries: 0 });

function fail(msg) {
  console.error('FAIL: ' + msg);
  process.exit(1);
}

function check(ok, msg) {
  if (!ok) fail(msg);
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

async function poll(id, status) {
  const deadline = Date.now() + 30000;
  for (;;) {
    const b = await client.batches.retrieve(id);
    if (b.status === status) return b;
    if (['completed', 'failed', 'expired', 'cancelled'].includes(b.status) || Date.now() > deadline) {
      fail(`batch ${id} is ${b.status}, want ${status}: ${JSON.stringify(b)}`);
    }
    await sleep(10);
  }
}

function jsonl(lines) {
  return lines.map((l) => JSON.stringify(l)).join('\n') + '\n';
}

function embeddings(model, prefix, n, text) {
  return Array.from({ length: n }, (_, i) => ({
    custom_id: `${prefix}-${i}`, method: 'POST', url: '/v1/embeddings', body: { model, input: text(i) },
  }));
}

async function upload(lines) {
  const f = await client.files.create({ file: await toFile(Buffer.from(jsonl(lines)), 'input.jsonl'), purpose: 'batch' });
  check(f.purpose === 'batch' && f.id.startsWith('file-'), `upload: ${JSON.stringify(f)}`);
  return f.id;
}

async function lines(fileID) {
  if (!fileID) return new Map();
  const resp = await client.files.content(fileID);
  const text = await resp.text();
  check(text.endsWith('\n'), `file ${fileID} does not end with a newline`);
  const out = new Map();
  for (const l of text.split('\n').filter((l) => l !== '')) {
    const r = JSON.parse(l);
    check(r.id.startsWith('batch_req_'), `line id ${r.id}`);
    check(!out.has(r.custom_id), `custom_id ${r.custom_id} twice in ${fileID}`);
    out.set(r.custom_id, r);
  }
  return out;
}

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

const create = (file, extra = {}, opts = {}) =>
  client.batches.create({ input_file_id: file, endpoint: '/v1/embeddings', completion_window: '24h', ...extra }, opts);

// Upload, create (retried with an Idempotency-Key), poll, list, download and
// parse: embeddings on an OpenAI-compatible provider and on Bedrock Titan.
const input = [
  ...embeddings('emb', 'openai', 3, (i) => `node openai ${i}`),
  ...embeddings('titan', 'bedrock', 3, (i) => `node titan ${i}`),
  ...embeddings('emb', 'refused', 1, () => 'fail-400 node'),
];
const file = await upload(input);
const opts = { headers: { 'Idempotency-Key': 'node-nightly-1' } };
let b = await create(file, { metadata: { job: 'node' } }, opts);
const retried = await create(file, { metadata: { job: 'node' } }, opts);
check(retried.id === b.id, `a retry with the same Idempotency-Key made ${retried.id}, not ${b.id}`);
check(b.status === 'validating' && b.object === 'batch' && b.expires_at - b.created_at === 86400, `created ${JSON.stringify(b)}`);
b = await poll(b.id, 'completed');
check(b.request_counts.total === 7 && b.request_counts.completed === 6 && b.request_counts.failed === 1,
  `request_counts ${JSON.stringify(b.request_counts)}`);
check(b.usage.input_tokens === 18 && b.metadata.job === 'node', `usage ${JSON.stringify(b.usage)} metadata ${JSON.stringify(b.metadata)}`);
const out = await lines(b.output_file_id);
const errs = await lines(b.error_file_id);
for (const l of input) {
  if (l.body.input.startsWith('fail')) {
    const r = errs.get(l.custom_id);
    check(r && r.response.status_code === 400 && r.response.body.error.message.includes('not valid'), `${l.custom_id}: ${JSON.stringify(r)}`);
    continue;
  }
  const r = out.get(l.custom_id);
  check(r && r.error === null && r.response.status_code === 200 && r.response.request_id.startsWith('req_'), `${l.custom_id}: ${JSON.stringify(r)}`);
  check(r.response.body.object === 'list' && r.response.body.data[0].embedding.length === 4, `${l.custom_id}: body ${JSON.stringify(r.response.body)}`);
}
check(out.size + errs.size === input.length, `${out.size} + ${errs.size} lines, want ${input.length}`);
// Chat completions on an OpenAI-compatible provider and on Anthropic
// (translated): the bodies are OpenAI chat.completion objects.
const chat = (model, prefix, n, text) => Array.from({ length: n }, (_, i) => ({
  custom_id: `${prefix}-${i}`, method: 'POST', url: '/v1/chat/completions',
  body: { model, messages: [{ role: 'user', content: text(i) }] },
}));
const chatInput = [
  ...chat('gpt', 'gpt', 2, (i) => `node chat ${i}`),
  ...chat('claude', 'claude', 2, (i) => `node claude ${i}`),
  ...chat('claude', 'claude-refused', 1, () => 'fail-400 node chat'),
];
let cb = await client.batches.create({ input_file_id: await upload(chatInput), endpoint: '/v1/chat/completions', completion_window: '24h' });
cb = await poll(cb.id, 'completed');
check(cb.endpoint === '/v1/chat/completions' && cb.request_counts.completed === 4 && cb.request_counts.failed === 1 &&
  cb.usage.output_tokens === 2 * 7 + 2 * 8, `chat batch ${JSON.stringify(cb)}`);
const chatOut = await lines(cb.output_file_id);
const chatErrs = await lines(cb.error_file_id);
for (const l of chatInput) {
  const text = l.body.messages[0].content;
  if (text.startsWith('fail')) {
    const r = chatErrs.get(l.custom_id);
    check(r && r.response.status_code === 400 && r.response.body.error.type === 'invalid_request_error', `${l.custom_id}: ${JSON.stringify(r)}`);
    continue;
  }
  const r = chatOut.get(l.custom_id);
  const body = r && r.response.body;
  check(body && body.object === 'chat.completion' && body.choices[0].message.role === 'assistant' &&
    body.choices[0].message.content === `echo: ${text}` && body.choices[0].finish_reason === 'stop', `${l.custom_id}: ${JSON.stringify(r)}`);
}

const page = await client.batches.list({ limit: 10 });
check(page.data.some((x) => x.id === b.id), `list: ${JSON.stringify(page.data.map((x) => x.id))}`);

// Cancel: the test opens the providers' gate once the batch is cancelling.
const toCancel = [...embeddings('emb', 'held', 2, (i) => `block node cancel ${i}`), ...embeddings('emb', 'rest', 2, (i) => `node rest ${i}`)];
let c = await create(await upload(toCancel));
c = await client.batches.cancel(c.id);
check(c.status === 'cancelling' && c.cancelling_at, `cancel answered ${JSON.stringify(c)}`);
c = await poll(c.id, 'cancelled');
const cancelled = [...(await lines(c.output_file_id)).values(), ...(await lines(c.error_file_id)).values()];
check(cancelled.length === 4, `${cancelled.length} lines after the cancel, want 4`);
for (const r of cancelled) {
  check(r.error === null || r.error.code === 'batch_cancelled', `after the cancel: ${JSON.stringify(r)}`);
}

// Expiry: the test moves the gateway's clock past the window once these
// lines are at the provider (which holds them).
const late = embeddings('emb', 'late', 2, (i) => `hold node expire ${i}`);
let e = await create(await upload(late));
e = await poll(e.id, 'expired');
const expired = await lines(e.error_file_id);
check(expired.size === 2 && [...expired.values()].every((r) => r.response === null && r.error.code === 'batch_expired'),
  `expired: ${JSON.stringify([...expired.values()])}`);

// Validation errors.
await expectError('unknown file', () => create('file-AAAAAAAAAAAAAAAAAAAAAAAA'), 404, 'not_found', '');
await expectError('no input file', () => create(''), 400, 'missing_required_parameter', 'input_file_id');
await expectError('an endpoint batches do not take', () => client.batches.create({ input_file_id: file, endpoint: '/v1/videos', completion_window: '24h' }), 400, 'invalid_value', 'endpoint');
await expectError('a window not allowed', () => create(file, { completion_window: '48h' }), 400, 'invalid_value', 'completion_window');
await expectError('a long metadata value', () => create(file, { metadata: { k: 'v'.repeat(513) } }), 400, 'invalid_value', 'metadata');
await expectError('an output expiry anchor', () => create(file, { output_expires_after: { anchor: 'completed_at', seconds: 3600 } }), 400, 'invalid_value', 'output_expires_after.anchor');
await expectError('get unknown', () => client.batches.retrieve('batch_AAAAAAAAAAAAAAAAAAAAAAAA'), 404, 'not_found', '');
await expectError('cancel a completed batch', () => client.batches.cancel(b.id), 409, 'conflict', '');
await expectError('list beyond 100', () => client.batches.list({ limit: 101 }), 400, 'invalid_value', 'limit');

console.log('ok');
