// Continue's own client library (@continuedev/openai-adapters, the code its extension and CLI talk to
// models through) against `editspec serve`: its OpenAI provider's chat stream, the same chat whole,
// an edit with `prediction` under the model name Continue sends it for (`--alias gpt-4o`), and its
// autocomplete's fill-in-the-middle stream (fim/completions) on a model with FIM tokens (the shipped
// target has them; the second URL may be the first).
//
//   node tests/server/continue-adapters.mjs http://127.0.0.1:PORT/v1/ http://127.0.0.1:FIM_PORT/v1/
import { constructLlmApi } from "@continuedev/openai-adapters";

function check(ok, what) {
  if (!ok) {
    console.error("continue-adapters: FAILED: " + what);
    process.exit(1);
  }
}
const signal = new AbortController().signal;
const chat = constructLlmApi({ provider: "openai", apiBase: process.argv[2], apiKey: "none" });
const fim = constructLlmApi({ provider: "openai", apiBase: process.argv[3], apiKey: "none" });

const code = "def area(w, h):\n    return w * h\n\n\ndef perimeter(w, h):\n    return 2 * (w + h)\n";
const messages = [{ role: "user", content: "Add a docstring to area.\n\n```python\n" + code + "```" }];

// the model list shows the alias Continue keys `prediction` on
const models = await chat.list();
check(models.some((m) => m.id === "gpt-4o"), "models: " + JSON.stringify(models));

// chat, streamed as Continue streams it (stream_options added by the adapter), then whole
let streamed = "", usage = null;
for await (const chunk of chat.chatCompletionStream({ model: "gpt-4o", messages, max_tokens: 48, temperature: 0, stream: true }, signal)) {
  if (chunk.usage) usage = chunk.usage;
  if (chunk.choices && chunk.choices.length > 0) streamed += chunk.choices[0].delta?.content ?? "";
}
check(streamed.length > 0, "chat stream: no text");
check(usage && usage.completion_tokens > 0, "chat stream: usage " + JSON.stringify(usage));
const whole = await chat.chatCompletionNonStream({ model: "gpt-4o", messages, max_tokens: 48, temperature: 0, stream: false }, signal);
check(whole.choices[0].message.content === streamed, "chat whole differs from the stream: " + JSON.stringify([whole.choices[0].message.content, streamed]));

// an edit with the code as the prediction: the same answer, prediction tokens accepted
const plain = await chat.chatCompletionNonStream({ model: "gpt-4o", messages, max_tokens: 256, temperature: 0, stream: false }, signal);
const edit = await chat.chatCompletionNonStream({ model: "gpt-4o", messages, max_tokens: 256, temperature: 0, stream: false,
                                                  prediction: { type: "content", content: code } }, signal);
check(edit.choices[0].message.content === plain.choices[0].message.content, "prediction changed the answer");
const d = edit.usage.completion_tokens_details;
check(d && Number.isInteger(d.accepted_prediction_tokens) && (plain.choices[0].message.content.length === 0 || d.accepted_prediction_tokens > 0),
      "prediction usage " + JSON.stringify(edit.usage));

// autocomplete: fill in the middle, streamed
let middle = "", chunks = 0;
for await (const chunk of fim.fimStream({ model: "editspec", prompt: "def add(a, b):\n    return ", suffix: "\n\nprint(add(1, 2))\n",
                                          max_tokens: 16, temperature: 0 }, signal)) {
  middle += chunk.choices[0].delta?.content ?? "";
  chunks++;
}
check(chunks > 0, "fim: no chunk");
console.log(JSON.stringify({ ok: true, chat_chars: streamed.length, accepted_prediction_tokens: d.accepted_prediction_tokens,
                             fim_chunks: chunks, fim_chars: middle.length }));
