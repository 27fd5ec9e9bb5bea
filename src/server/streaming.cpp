// Streaming for `editspec serve` (server-state.h): the slot writes text into a channel and the
// connection's thread sends it as server-sent events, so a slow reader never holds a slot; a client
// that goes away stops the generation at its next token.
#include "server-state.h"

#include <chrono>
#include <mutex>

namespace editspec {

using json = nlohmann::json;

void stream_response(server_state & s, const std::shared_ptr<generation> & g, const std::shared_ptr<text_channel> & ch,
                     const std::string & id, httplib::Response & res) {
    res.set_header("Cache-Control", "no-cache");
    res.set_chunked_content_provider("text/event-stream", [&s, g, ch, id](size_t, httplib::DataSink & sink) {
        auto write = [&](const json & j) {
            const std::string ev = sse(j);
            return sink.is_writable() && sink.write(ev.data(), ev.size());
        };
        auto leave = [&] {
            std::lock_guard<std::mutex> lock(ch->mu);
            ch->reader_gone = true;
            return false;
        };
        try {
            while (true) {
                std::string text;
                bool finished = false;
                {
                    std::unique_lock<std::mutex> lock(ch->mu);
                    // a reader that leaves during a long prefill stops it too (not only at the next token)
                    while (!ch->cv.wait_for(lock, std::chrono::milliseconds(100), [&] { return ch->finished || !ch->pending.empty(); })) {
                        if (s.stopping.load() || (g->gone && g->gone())) {
                            g->cancel = true;
                            ch->reader_gone = true;
                        }
                    }
                    text.swap(ch->pending);
                    finished = ch->finished;
                }
                if (!text.empty() && !write(stream_chunk(s, *g, id, text, nullptr))) return leave();
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
                write(stream_chunk(s, *g, id, "", api_finish_reason(g->r.stop)));
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
