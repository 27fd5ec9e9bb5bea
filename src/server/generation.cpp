// One generation of `editspec serve` (server-state.h): a request parsed, tokenized and checked, queued
// on a slot or a session, waited for while its client is watched.
#include "server-state.h"
#include "editspec/clock.h"
#include "editspec/edit.h"
#include "editspec/log.h"

#include <algorithm>
#include <chrono>

namespace editspec {

using json = nlohmann::json;

std::string make_id(server_state & s, const char * prefix) {
    return std::string(prefix) + std::to_string(s.next_id++);
}

int64_t unix_now() {
    return (int64_t) std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}

void send_json(httplib::Response & res, int status, const json & j) {
    res.status = status;
    res.set_content(j.dump(-1, ' ', false, json::error_handler_t::replace), "application/json");
}

void send_error(httplib::Response & res, const api_error & err) {
    if (err.status == 503) res.set_header("Retry-After", "1");
    send_json(res, err.status, api_error_json(err));
}

api_error make_error(int status, const std::string & message, const char * type) {
    api_error err;
    err.status = status;
    err.message = message;
    err.type = type ? type : status >= 500 ? "server_error" : "invalid_request_error";
    return err;
}

std::function<bool()> watch_client() {
    const int fd = connection_socket();
    if (fd < 0) return nullptr;
    return [fd] { return connection_closed(fd); };
}

bool generation_prepare(server_state & s, api_endpoint ep, const std::string & body, generation & g, api_error & err) {
    if (!api_parse(ep, body, g.rq, err)) return false;
    const model & m = *s.rn.target.model;
    const int32_t n_ctx = s.params.runner.n_ctx;
    // an apply's view of the file (apply_view_for): a constrained apply reads it once, as it writes it,
    // unless it runs on a session's KV (which holds the file) or, with --apply-view cached, a slot or the
    // prompt store holds its file-view prompt
    apply_view view = APPLY_VIEW_FILE;
    if (api_uses_apply_prompt(g.rq, m)) {
        bool cold = api_apply_constrained(g.rq, m) && g.rq.session.empty();
        if (cold && s.params.file_view == APPLY_VIEW_CACHED) {
            std::vector<llama_token> whole;
            if (!api_prompt_tokens(m, g.rq, whole, err, (size_t) n_ctx, s.params.layout, APPLY_VIEW_FILE)) return false;
            cold = !s.slots || 2 * (size_t) s.slots->cached_tokens(whole) < whole.size();
        }
        view = apply_view_for(s.params.file_view, cold);
        ES_LOG_INFO("apply: the prompt's view of the file: %s\n", apply_view_name(view));
    }
    if (!api_prompt_tokens(m, g.rq, g.req.prompt, err, (size_t) n_ctx, s.params.layout, view)) return false;
    if (const std::string over = request_over_context(g.req, n_ctx); !over.empty()) {
        err.param = "messages";
        err.code = "context_length_exceeded";
        err.message = over + " (the server's --ctx-size)";
        return false;
    }
    const int32_t room = n_ctx - 1 - (int32_t) g.req.prompt.size();
    const int32_t want = g.rq.n_predict < 0 ? s.params.max_tokens : g.rq.n_predict;
    g.req.gen.n_predict = std::min({want, room, s.params.max_tokens});
    g.req.gen.sampling = g.rq.sampling;
    g.req.gen.stop = g.rq.stop;
    g.req.gen.n_indent = g.rq.n_indent;
    g.req.gen.t_max_ms = g.rq.t_max_predict_ms;
    g.req.gen.prompt_cache = s.params.prompt_cache;
    g.ms = &s.method;
    g.rq.constrain = api_apply_constrained(g.rq, m);
    if (g.rq.constrain) {
        if (g.rq.sampling.temp > 0.0f) {
            return api_fail(err, "constrain", "a constrained apply decodes greedily: send temperature 0 or leave it out");
        }
        g.req.constraint = std::make_shared<apply_constraint>(m, g.rq.apply);
    }
    if (g.rq.has_prediction) {
        request_prediction_tokens(m, g.rq.prediction, g.req);
        if (!g.req.original.empty()) g.ms = &s.with_reuse;
    }
    return true;
}

bool generation_start(server_state & s, const std::shared_ptr<generation> & g, const std::shared_ptr<text_channel> & ch, api_error & err) {
    server_state * sp = &s;
    g->req.gen.on_text = [sp, ch](std::string_view text) {
        if (sp->stopping.load()) return false;
        if (ch) {
            {
                std::lock_guard<std::mutex> lock(ch->mu);
                if (ch->reader_gone) return false;
                ch->pending.append(text);
            }
            ch->cv.notify_all();
        }
        return true;
    };
    struct finish_on_exit { // the channel hears the end when the job is done with, run or not
        std::shared_ptr<text_channel> ch;
        ~finish_on_exit() {
            if (!ch) return;
            {
                std::lock_guard<std::mutex> lock(ch->mu);
                ch->finished = true;
            }
            ch->cv.notify_all();
        }
    };
    auto fin = std::make_shared<finish_on_exit>(); // (a temporary's destructor would finish the channel now)
    fin->ch = ch;
    if (!g->rq.session.empty()) {
        // on the session's context, from the document's KV (server-sessions.h)
        json out;
        const int status = s.sessions->submit(g->rq.session, [sp, g, fin](context & ctx, slot_memory & mem,
                                                                          const prompt_cache_params & reuse) {
            g->req.stats = &mem.stats;
            g->req.cache = &mem.cache;
            g->req.gen.prompt_cache = reuse;
            ctx.set_cancel(&g->cancel);
            g->ok = runner_generate_in(sp->rn, ctx, *g->ms, g->req, g->r, &g->error);
            ctx.set_cancel(nullptr);
        }, g->done, out);
        if (status != 200) {
            err = make_error(status, out["error"]["message"].get<std::string>());
            return false;
        }
        return true;
    }
    const auto t_queue = clock_type::now();
    const slot_status st = s.slots->submit(g->req.prompt, [sp, g, fin](context & ctx, slot_memory & mem) {
        g->req.stats = &mem.stats;
        g->req.cache = &mem.cache;
        ctx.set_cancel(&g->cancel);
        g->ok = runner_generate_in(sp->rn, ctx, *g->ms, g->req, g->r, &g->error);
        ctx.set_cancel(nullptr);
    }, g->done, [sp, g] { return sp->stopping.load() || (g->gone && g->gone()); });
    s.mx.queue_wait(ms_since(t_queue) / 1000.0);
    if (st == SLOT_CANCELLED) {
        err = make_error(499, "the client closed the connection while the request waited", "invalid_request_error");
        return false;
    }
    if (st == SLOT_QUEUE_FULL) {
        err = make_error(503, "every slot is busy and " + std::to_string(s.params.max_queue) +
                                  " requests wait already (--queue); retry shortly", "server_error");
        return false;
    }
    if (st == SLOT_STOPPING) {
        err = make_error(503, "the server is stopping", "server_error");
        return false;
    }
    return true;
}

bool generation_finish(server_state & s, generation & g, api_error & err) {
    try {
        // a client that leaves (or a stopping server) cancels the job: it stops within one step
        while (g.done.wait_for(std::chrono::milliseconds(100)) != std::future_status::ready) {
            if (s.stopping.load() || (g.gone && g.gone())) g.cancel = true;
        }
        g.done.get();
    } catch (const session_gone & e) {
        err = make_error(404, e.what());
        err.param = "session";
        err.code = "session_not_found";
        return false;
    } catch (const std::exception & e) {
        err = make_error(500, std::string("internal error while generating: ") + e.what());
        return false;
    } catch (...) {
        err = make_error(500, "internal error while generating");
        return false;
    }
    if (!g.ok || g.r.stop == STOP_REASON_ERROR) {
        err = make_error(500, g.ok ? g.r.error : g.error);
        return false;
    }
    s.mx.generation(g.r);
    return true;
}

} // namespace editspec
