// The official OpenAI Node SDK against `editspec serve`: chat (whole and streamed), Predicted Outputs
// with their usage fields, models.list, OpenAI's refusal of `n` with a prediction, tools and a tool's
// result (whole and through the SDK's streaming helper), and (given a
// CanItEdit file) the same greedy answer with and without a prediction on its first 20 edits.
//
//   node tests/server/openai-sdk.mjs http://127.0.0.1:PORT/v1 [datasets/canitedit/normalized.jsonl]
import OpenAI from "openai";
import { readFileSync } from "node:fs";

const client = new OpenAI({ baseURL: process.argv[2], apiKey: process.env.EDITSPEC_API_KEY || "none" });
function check(ok, what) {
  if (!ok) {
    console.error("openai-sdk: FAILED: " + what);
    process.exit(1);
  }
}

const code = "def area(w, h):\n    return w * h\n\n\ndef perimeter(w, h):\n    return 2 * (w + h)\n";
const messages = [{ role: "user", content: "Add a docstring to area.\n\n```python\n" + code + "```" }];

const models = await client.models.list();
check(models.data.length === 1 && models.data[0].object === "model", "models.list: " + JSON.stringify(models.data));

// no prediction: a chat answer
const plain = await client.chat.completions.create({ model: "x", messages, max_tokens: 48, temperature: 0 });
check(typeof plain.choices[0].message.content === "string", "chat: no content");
check(plain.usage.completion_tokens > 0 && plain.usage.prompt_tokens > 0, "chat: usage " + JSON.stringify(plain.usage));

// the same streamed: the same text
const stream = await client.chat.completions.create({ model: "x", messages, max_tokens: 48, temperature: 0, stream: true,
                                                      stream_options: { include_usage: true } });
let streamed = "", finish = null, usage = null;
for await (const chunk of stream) {
  if (chunk.usage) usage = chunk.usage;
  if (chunk.choices.length > 0) {
    streamed += chunk.choices[0].delta.content || "";
    finish = chunk.choices[0].finish_reason || finish;
  }
}
check(streamed === plain.choices[0].message.content, "stream text differs: " + JSON.stringify([streamed, plain.choices[0].message.content]));
check(finish === plain.choices[0].finish_reason, "stream finish_reason " + finish);
check(usage && usage.completion_tokens === plain.usage.completion_tokens, "stream usage " + JSON.stringify(usage));

// Predicted Outputs: the code as the prediction; accepted + rejected reported
const pred = await client.chat.completions.create({ model: "x", messages, max_tokens: 256, temperature: 0,
                                                    prediction: { type: "content", content: code } });
const d = pred.usage.completion_tokens_details;
check(d && Number.isInteger(d.accepted_prediction_tokens) && Number.isInteger(d.rejected_prediction_tokens),
      "prediction usage " + JSON.stringify(pred.usage));
// its own answer as the prediction: the same answer, mostly taken from the prediction
const answer = pred.choices[0].message.content;
const again = await client.chat.completions.create({ model: "x", messages, max_tokens: 256, temperature: 0,
                                                     prediction: { type: "content", content: [{ type: "text", text: answer }] } });
check(again.choices[0].message.content === answer, "prediction changed the answer");
check(answer.length === 0 || again.usage.completion_tokens_details.accepted_prediction_tokens > 0, "no prediction token accepted");

// OpenAI's refusal: n > 1 with a prediction
let refused = null;
try {
  await client.chat.completions.create({ model: "x", messages, n: 2, prediction: { type: "content", content: code } });
} catch (e) {
  refused = e;
}
check(refused instanceof OpenAI.BadRequestError && refused.status === 400 && refused.param === "n", "n=2 with prediction: " + refused);

// tools: offered, then a call and its result fed back; whole and through the SDK's streaming helper, which
// assembles tool-call deltas (the shipped model writes no calls: the shapes are what this checks)
const tools = [{ type: "function", function: { name: "run_tests", description: "Run the file's tests",
                                               parameters: { type: "object", properties: { path: { type: "string" } } } } }];
const withTools = await client.chat.completions.create({ model: "x", messages, tools, tool_choice: "auto", max_tokens: 24 });
const tm = withTools.choices[0].message;
check(tm.role === "assistant" && (typeof tm.content === "string" || Array.isArray(tm.tool_calls)), "tools: " + JSON.stringify(tm));
check(withTools.usage.prompt_tokens > plain.usage.prompt_tokens, "tools: not in the prompt " + JSON.stringify(withTools.usage));
const roundTrip = [...messages,
                   { role: "assistant", content: null, tool_calls: [{ id: "call_1", type: "function",
                                                                     function: { name: "run_tests", arguments: "{\"path\": \"area.py\"}" } }] },
                   { role: "tool", tool_call_id: "call_1", content: "2 passed" }];
const completions = client.chat.completions.stream ? client.chat.completions : client.beta.chat.completions; // v4: beta
const helper = completions.stream({ model: "x", messages: roundTrip, tools, max_tokens: 24 });
const final = await helper.finalChatCompletion();
check(final.choices[0].message.role === "assistant" && final.choices[0].finish_reason, "tools stream: " + JSON.stringify(final.choices[0]));

// a prediction never changes the answer: CanItEdit's first 20 edits, as an editor sends them (the
// instruction and the code fenced), greedy, with and without the code as the prediction
let same = 0, accepted = 0;
if (process.argv[3]) {
  const items = readFileSync(process.argv[3], "utf8").split("\n").filter((l) => l.trim()).slice(0, 20).map((l) => JSON.parse(l));
  for (const it of items) {
    const msgs = [{ role: "user", content: it.instruction_descriptive + "\n\n```python\n" + it.code_before + "```\n" }];
    const base = await client.chat.completions.create({ model: "x", messages: msgs, max_tokens: 160, temperature: 0 });
    const hinted = await client.chat.completions.create({ model: "x", messages: msgs, max_tokens: 160, temperature: 0,
                                                          prediction: { type: "content", content: it.code_before } });
    check(hinted.choices[0].message.content === base.choices[0].message.content,
          "prediction changed the answer on " + it.id + ": " + JSON.stringify([base.choices[0].message.content, hinted.choices[0].message.content]));
    accepted += hinted.usage.completion_tokens_details.accepted_prediction_tokens;
    same++;
  }
  check(accepted > 0, "no prediction token accepted over the CanItEdit edits");
}

console.log(JSON.stringify({ ok: true, prediction_usage: again.usage.completion_tokens_details, answer_chars: answer.length,
                             canitedit_same_with_and_without_prediction: same, canitedit_accepted_prediction_tokens: accepted }));
