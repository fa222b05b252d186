// The official `openai` npm package against `glassbox serve` (test_serve.cpp runs it): a chat, the same chat
// streamed, and a text completion with logprobs. Prints one JSON object for the test to check.
// Usage: GLASSBOX_URL=http://127.0.0.1:PORT node openai_client.cjs NODE_MODULES_DIR
const path = require("path");
const OpenAI = require(path.join(process.argv[2], "openai"));

(async () => {
  const client = new OpenAI({ baseURL: process.env.GLASSBOX_URL + "/v1", apiKey: "sesame", maxRetries: 0 });
  const models = await client.models.list();
  const model = models.data[0].id;
  const messages = [{ role: "user", content: "Tell me a story about a cat." }];
  const chat = await client.chat.completions.create({ model, messages, max_tokens: 12, temperature: 0 });
  const stream = await client.chat.completions.create({ model, messages, max_tokens: 12, temperature: 0, stream: true });
  let streamed = "";
  let chunks = 0;
  for await (const chunk of stream) {
    chunks++;
    streamed += (chunk.choices[0] && chunk.choices[0].delta && chunk.choices[0].delta.content) || "";
  }
  const text = await client.completions.create({ model, prompt: "Once upon a time", max_tokens: 12, temperature: 0, logprobs: 2 });
  console.log(JSON.stringify({
    model,
    chat: chat.choices[0].message.content,
    finish: chat.choices[0].finish_reason,
    streamed,
    chunks,
    completion: text.choices[0].text,
    trace_url: chat.glassbox && chat.glassbox.trace_url,
  }));
})().catch((e) => {
  console.error(String(e && e.stack || e));
  process.exit(1);
});
