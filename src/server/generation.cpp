// One request of `editspec serve` (server-state.h): parsed, tokenized and checked, queued
// on a slot or a session, waited for while its client is watched.
#include "server-state.h"
#include "editspec/clock.h"
#include "editspec/edit.h"
#include "editspec/grammar.h"
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

bool served_request::write(std::string_view text) {
    {
        std::lock_guard<std::mutex> lock(mu);
        if (reader_gone) return false;
        if (!streamed) return true;
        pending.append(text);
    }
    cv.notify_all();
    return true;
}

void served_request::finish(slot_status o, std::exception_ptr f) {
    {
        std::lock_guard<std::mutex> lock(mu);
        finished = true;
        outcome = o;
        failure = std::move(f);
    }
    cv.notify_all();
}

void served_request::leave() {
    cancel = true;
    {
        std::lock_guard<std::mutex> lock(mu);
        reader_gone = true;
    }
    cv.notify_all();
}

bool served_request::next(std::string & text) {
    std::unique_lock<std::mutex> lock(mu);
    cv.wait(lock, [&] { return finished || !pending.empty(); });
    text.swap(pending);
    pending.clear();
    return finished;
}

// the field that holds an apply's file on its endpoint
static const char * apply_code_field(const api_request & rq) {
    return rq.endpoint == API_CODE_APPLY ? "initial_code" : rq.endpoint == API_APPLY ? "code" : "messages";
}

// An apply whose merged file cannot fit the context or the tokens it may generate is refused before
// it decodes (400, OpenAI's context_length_exceeded), naming the sizes: a merge is whole or an error.
static bool apply_room_check(const server_state & s, served_request & g, api_error & err) {
    const model & m = *s.rn.target.model;
    const int32_t n_ctx = s.params.runner.n_ctx;
    // the file's tokens: the prediction's where it is the file (the usual case), else its own
    const token_vec file = g.rq.has_prediction && g.rq.prediction == g.rq.apply.code ? g.req.original
                                                                                      : edit_original_tokens(m, g.rq.apply.code);
    g.req.n_answer = request_apply_answer_tokens(m, g.rq.apply, file, n_ctx);
    const bool client_cap = g.rq.n_predict >= 0 && g.rq.n_predict < s.params.max_tokens;
    const int32_t n_predict = client_cap ? g.rq.n_predict : s.params.max_tokens;
    bool over_ctx = false;
    const std::string why = request_answer_room(g.req, n_ctx, n_predict, &over_ctx);
    if (why.empty()) return true;
    err = make_error(400, "");
    err.code = "context_length_exceeded";
    if (over_ctx) {
        err.param = apply_code_field(g.rq);
        err.message = "the file is too large to merge here: " + why + " (the server's --ctx-size; start it with "
                      "--ctx-size " + std::to_string(request_ctx_needed(g.req)) + " or more)";
    } else if (client_cap) {
        err.param = "max_tokens";
        err.code = "max_tokens_too_small";
        err.message = "max_tokens is too small for the merged file: " + why + "; raise max_tokens or leave it out";
    } else {
        err.param = apply_code_field(g.rq);
        err.message = "the file is too large to merge here: " + why + " (the server's --max-tokens; start it with "
                      "--max-tokens " + std::to_string(g.req.n_answer) + " or more)";
    }
    return false;
}

// An apply cut short (stop_reason_whole) is not the file: an error in place of a merge, naming what
// cut it (the file's room, the client's max_tokens or time limit, the server's --max-tokens, a client
// that left, a server that stops)
static api_error apply_incomplete_error(const server_state & s, const served_request & g) {
    const generate_result & r = g.r;
    const int32_t n_ctx = s.params.runner.n_ctx;
    const int32_t room = n_ctx - 1 - (int32_t) g.req.prompt.size();
    const std::string done = "the merge stopped after " + std::to_string(r.tokens.size()) + " tokens, before the file's end";
    api_error err = make_error(400, "");
    err.code = "incomplete_merge";
    switch (r.stop) {
        case STOP_REASON_CALLBACK:
            if (s.stopping.load()) return make_error(503, done + ": the server is stopping; nothing was merged", "server_error");
            return make_error(499, done + ": the client closed the connection", "invalid_request_error");
        case STOP_REASON_LINE:
            err.param = "t_max_predict_ms";
            err.message = done + ": t_max_predict_ms reached; nothing was merged (raise it or leave it out)";
            return err;
        case STOP_REASON_CONTEXT:
        case STOP_REASON_MAX_TOKENS:
            if (r.stop == STOP_REASON_CONTEXT || g.req.gen.n_predict >= room) {
                err.code = "context_length_exceeded";
                err.param = apply_code_field(g.rq);
                err.message = done + ": the context (the server's --ctx-size " + std::to_string(n_ctx) +
                              ") is full after the " + std::to_string(g.req.prompt.size()) + "-token prompt; nothing was merged";
            } else if (g.rq.n_predict >= 0 && g.req.gen.n_predict == g.rq.n_predict) {
                err.param = "max_tokens";
                err.message = done + ": max_tokens (" + std::to_string(g.rq.n_predict) + ") reached; nothing was merged "
                              "(raise max_tokens or leave it out)";
            } else {
                err.message = done + ": the server's --max-tokens (" + std::to_string(s.params.max_tokens) +
                              ") reached; nothing was merged";
            }
            return err;
        default:
            return make_error(500, done + " (" + stop_reason_name(r.stop) + "); nothing was merged");
    }
}

// a chat with tools (or any chat, with --chat-template-file): rendered by the model's template through
// llama.cpp's Jinja engine; the template's own end-of-turn strings stop it too
static bool chat_prepare(server_state & s, api_request & rq, api_error & err) {
    if (!s.chat.impl) {
        return api_fail(err, rq.tools.empty() ? "messages" : "tools",
                        "this server cannot render tools into the model's chat template: " + s.chat_error);
    }
    if (api_uses_apply_prompt(rq, *s.rn.target.model)) return true; // prompted as an apply (api_prompt_tokens)
    chat_tools_input in;
    in.messages = rq.messages;
    in.tools = rq.tools;
    in.tool_choice = rq.tool_choice;
    in.parallel_tool_calls = rq.parallel_tool_calls;
    in.json_schema = rq.json_schema;
    std::string why;
    if (!chat_tools_render(s.chat, in, rq.jinja, why)) return api_fail(err, "messages", why);
    for (const std::string & stop : rq.jinja.stops) {
        if (!stop.empty() && std::find(rq.stop.begin(), rq.stop.end(), stop) == rq.stop.end()) rq.stop.push_back(stop);
    }
    return true;
}

bool generation_prepare(server_state & s, api_endpoint ep, const std::string & body, served_request & g, api_error & err) {
    if (!api_parse(ep, body, g.rq, err)) return false;
    const model & m = *s.rn.target.model;
    const int32_t n_ctx = s.params.runner.n_ctx;
    if (ep == API_CHAT && (g.rq.uses_tools || !s.params.chat_template.empty()) && !chat_prepare(s, g.rq, err)) return false;
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
    if (ep == API_CHAT && !g.rq.is_apply && !g.rq.jinja.grammar.gbnf.empty()) {
        // tool calls follow the template's grammar, as llama-server constrains them: greedy requests, unless
        // "constrain": false (a sampled request's calls are the model's own, unconstrained); a JSON answer
        // (response_format) always does, so it is greedy
        const bool json_answer = !g.rq.json_schema.empty();
        g.rq.constrain = g.rq.constrain_given ? g.rq.constrain : g.rq.sampling.temp <= 0.0f || json_answer;
        if (g.rq.constrain) {
            if (g.rq.sampling.temp > 0.0f) {
                return json_answer ? api_fail(err, "response_format", "a JSON answer is held to its schema by greedy decoding here: "
                                                                      "send temperature 0 (or leave it out)")
                                   : api_fail(err, "constrain", "tool calls are constrained greedily: send temperature 0, or \"constrain\": false");
            }
            std::string why;
            auto c = grammar_constraint::create(m, g.rq.jinja.grammar, why);
            if (!c) return api_fail(err, "tools", why);
            g.req.constraint = std::move(c);
        }
    } else {
        g.rq.constrain = api_apply_constrained(g.rq, m);
    }
    if (g.rq.constrain && g.rq.is_apply) {
        if (g.rq.sampling.temp > 0.0f) {
            return api_fail(err, "constrain", "a constrained apply decodes greedily: send temperature 0 or leave it out");
        }
        g.req.constraint = std::make_shared<apply_constraint>(m, g.rq.apply);
    }
    if (g.rq.has_prediction) {
        request_prediction_tokens(m, g.rq.prediction, g.req);
        if (!g.req.original.empty()) g.ms = &s.with_reuse;
    }
    return !g.rq.is_apply || apply_room_check(s, g, err);
}

// a generation the server's stop ended before its own end (server_run exits 3)
static void count_cut(server_state & s, const served_request & g) {
    if (s.stopping.load() && (g.r.stop == STOP_REASON_CALLBACK || (!g.ok && g.cancel.load()))) s.cut_by_stop++;
}

bool generation_start(server_state & s, const std::shared_ptr<served_request> & g, api_error & err) {
    server_state * sp = &s;
    g->req.gen.on_text = [sp, g = g.get()](std::string_view text) { return !sp->stopping.load() && g->write(text); };
    // the client's connection, watched while the request is queued or decodes: a client that leaves
    // cancels it at once (server-watcher.h). The callback holds the request; the slots outlive the watcher
    g->watch = s.watcher->watch(connection_socket(), [sp, g] {
        g->leave();
        if (sp->slots) sp->slots->drop_cancelled();
    });
    // the job's end (or the queue's): the client is no longer watched, the reader wakes. The watcher's
    // handle goes first: the connection may close and its socket number be reused once the reader knows
    auto done = [sp, g](slot_status outcome, std::exception_ptr failure) {
        sp->watcher->unwatch(g->watch);
        if (outcome == SLOT_CANCELLED) sp->mx.client_left(true);
        else if (outcome == SLOT_OK && g->cancel.load() && !sp->stopping.load()) sp->mx.client_left(false);
        g->finish(outcome, std::move(failure));
    };
    if (!g->rq.session.empty()) {
        // on the session's context, from the document's KV (server-sessions.h)
        json out;
        const int status = s.sessions->submit(g->rq.session, [sp, g](context & ctx, slot_memory & mem,
                                                                     const prompt_cache_params & reuse) {
            g->req.stats = &mem.stats;
            g->req.cache = &mem.cache;
            g->req.gen.prompt_cache = reuse;
            ctx.set_cancel(&g->cancel);
            g->ok = runner_generate_in(sp->rn, ctx, *g->ms, g->req, g->r, &g->error);
            ctx.set_cancel(nullptr);
            count_cut(*sp, *g);
        }, [done](std::exception_ptr failure) { done(SLOT_OK, std::move(failure)); }, out);
        if (status != 200) {
            s.watcher->unwatch(g->watch);
            err = make_error(status, out["error"]["message"].get<std::string>());
            return false;
        }
        return true;
    }
    const auto t_queue = clock_type::now();
    const slot_status st = s.slots->submit(g->req.prompt, [sp, g, t_queue](context & ctx, slot_memory & mem) {
        sp->mx.queue_wait(ms_since(t_queue) / 1000.0);
        g->req.stats = &mem.stats;
        g->req.cache = &mem.cache;
        g->req.draft_ctx = mem.draft;
        g->req.draft_kept = &mem.draft_kept;
        g->req.head = sp->head.get();
        ctx.set_cancel(&g->cancel);
        if (mem.draft) mem.draft->set_cancel(&g->cancel);
        g->ok = runner_generate_in(sp->rn, ctx, *g->ms, g->req, g->r, &g->error);
        ctx.set_cancel(nullptr);
        if (mem.draft) mem.draft->set_cancel(nullptr);
        count_cut(*sp, *g);
    }, done, &g->cancel);
    if (st == SLOT_OK) return true;
    s.watcher->unwatch(g->watch);
    if (st == SLOT_QUEUE_FULL) {
        err = make_error(503, "every slot is busy and " + std::to_string(s.params.max_queue) +
                                  " requests wait already (--queue); retry shortly", "server_error");
        return false;
    }
    err = make_error(503, "the server is stopping", "server_error");
    return false;
}

bool generation_finish(server_state & s, served_request & g, api_error & err) {
    // the job's end: a client that leaves (or a stopping server) cancels the job through the watcher, and
    // it stops within one step
    std::string ignored;
    while (!g.next(ignored)) {
    }
    if (g.outcome == SLOT_CANCELLED) {
        err = make_error(499, "the client closed the connection while the request waited", "invalid_request_error");
        return false;
    }
    if (g.outcome == SLOT_STOPPING) {
        err = make_error(503, "the server is stopping", "server_error");
        return false;
    }
    try {
        if (g.failure) std::rethrow_exception(g.failure);
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
    if (g.rq.is_apply && !stop_reason_whole(g.r.stop)) {
        err = apply_incomplete_error(s, g);
        return false;
    }
    s.mx.generation(g.r);
    return true;
}

} // namespace editspec
