// The AWS SDK for JavaScript's Bedrock client against the local process,
// with its default request handler — HTTP/2, which it speaks to an http://
// URL with prior knowledge (h2c): run by TestBedrockNodeClientOverH2C
// (pkg/gateway), which gives this script the gateway's address
// (SLUICE_URL) and a key (SLUICE_KEY). It prints "ok", or exits non-zero
// saying why.
import { BedrockRuntimeClient, ConverseCommand } from '@aws-sdk/client-bedrock-runtime';

function client(key) {
  const c = new BedrockRuntimeClient({
    region: 'us-east-1',
    endpoint: process.env.SLUICE_URL + '/bedrock',
    credentials: { accessKeyId: 'AKIDCLIENT', secretAccessKey: 'client-secret' },
    maxAttempts: 1,
  });
  c.middlewareStack.add((next) => (args) => {
    args.request.headers['x-sluice-api-key'] = key;
    return next(args);
  }, { step: 'build', name: 'sluiceKey' });
  return c;
}

const converse = (key) => client(key).send(new ConverseCommand({
  modelId: 'us.anthropic.claude-3-5-sonnet-20241022-v2:0',
  messages: [{ role: 'user', content: [{ text: 'Hi' }] }],
}));

function fail(msg) {
  console.error('FAIL: ' + msg);
  process.exit(1);
}

try {
  const out = await converse(process.env.SLUICE_KEY);
  const text = out.output?.message?.content?.[0]?.text;
  if (text !== 'Hi from bedrock') fail('converse answered ' + JSON.stringify(out));
} catch (e) {
  fail('converse: ' + e.name + ': ' + e.message);
}

// sluice's own refusal, read by the SDK as AWS's error shape.
try {
  await converse('sk-not-a-key');
  fail('a call without a valid key succeeded');
} catch (e) {
  if (e.name !== 'UnrecognizedClientException' || !e.message.includes('API key') || e.$metadata?.httpStatusCode !== 401) {
    fail(`without a valid key: ${e.name} (${e.$metadata?.httpStatusCode}): ${e.message}`);
  }
}
console.log('ok');
