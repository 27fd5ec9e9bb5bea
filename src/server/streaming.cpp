// Streaming for `editspec serve` (server-state.h): the slot writes text into its request's channel and
// the connection's thread sends it as server-sent events, so a slow reader never holds a slot; a client
// that goes away stops the generation at once (the client watcher) or at its next token (a failed write).
#include "server-state.h"

#include <mutex>

namespace editspec {

using json = nlohmann::json;

void stream_response(server_state & s, const std::shared_ptr<served_request> & g, const std::string & id,
                     httplib::Response & res) {
    res.set_header("Cache-Control", "no-cache");
    res.set_chunked_content_provider("text/event-stream", [&s, g, id](size_t, httplib::DataSink & sink) {
        auto write = [&](const json & j) {
            const std::string ev = sse(j);
            return sink.is_writable() && sink.write(ev.data(), ev.size());
        };
        auto leave = [&] {
            g->leave(); // the job stops at its next token
            return false;
        };
        // a chat the model's template rendered: its reply read as it grows, sent as deltas of content,
        // reasoning and tool calls (an unfinished call is held back until the parser can read it)
        const bool parsed = g->rq.endpoint == API_CHAT && g->rq.jinja.parser && !g->rq.is_apply;
        std::string all;
        chat_reply_reader reader;
        auto send_deltas = [&](bool partial) {
            const chat_reply next = reader.read(*g, all, partial);
            for (const chat_reply_delta & d : chat_reply_diff(reader.reply, next)) {
                json delta = {{"role", "assistant"}};
                if (!d.content.empty()) delta["content"] = d.content;
                if (!d.reasoning_content.empty()) delta["reasoning_content"] = d.reasoning_content;
                if (d.tool_index >= 0) {
                    json call = {{"index", d.tool_index}, {"function", {{"arguments", d.tool_call.arguments}}}};
                    if (!d.tool_call.id.empty()) call["id"] = d.tool_call.id;
                    if (!d.tool_call.name.empty()) {
                        call["type"] = "function";
                        call["function"]["name"] = d.tool_call.name;
                    }
                    delta["tool_calls"] = json::array({call});
                }
                if (!write(stream_delta_chunk(s, *g, id, delta, nullptr))) return false;
            }
            reader.reply = next;
            return true;
        };
        try {
            while (true) {
                // the text as it comes; a client that leaves (the watcher) or a stop ends the job, and so this wait
                std::string text;
                const bool finished = g->next(text);
                if (parsed) {
                    all += text;
                    if (!text.empty() && !send_deltas(true)) return leave();
                } else if (!text.empty() && !write(stream_chunk(s, *g, id, text, nullptr))) {
                    return leave();
                }
                if (finished) break;
            }
            api_error err;
            if (!generation_finish(s, *g, err)) {
                write(api_error_json(err));
            } else if (g->rq.endpoint == API_COMPLETION || g->rq.endpoint == API_INFILL) {
                json last = response_json(s, *g, id);
                if (last.contains("content")) last["content"] = "";
                write(last);
            } else {
                if (parsed && !send_deltas(false)) return leave();
                write(stream_chunk(s, *g, id, "", parsed ? chat_finish_reason(*g, reader.reply) : api_finish_reason(g->r.stop)));
                if (g->rq.include_usage) {
                    json u = stream_chunk(s, *g, id, "", nullptr);
                    u["choices"] = json::array();
                    u["usage"] = usage_json(*g);
                    write(u);
                }
                const std::string done = "data: [DONE]\n\n";
                if (sink.is_writable()) sink.write(done.data(), done.size());
            }
            sink.done();
            return true;
        } catch (...) {
            // the content provider runs outside httplib's exception handler: end this response only
            return leave();
        }
    });
}

} // namespace editspec
