// editspec complete: continue a prompt with the model, printing text (or one JSON object).
#include "cli/commands.h"
#include "editspec/decoder.h"
#include "editspec/generate.h"
#include "editspec/methods.h"

#include <nlohmann/json.hpp>

#include <cstdio>
#include <fstream>
#include <memory>
#include <sstream>

namespace editspec::cli {

namespace {

struct complete_opts {
    request_opts req;           // -m, --method, --draft-model, --gamma, -t, -c, --flash-attn
    std::string prompt;
    std::string file;
    int32_t n_predict = 128;
    float temp = 0.0f;
    int32_t top_k = 0;
    float top_p = 1.0f;
    uint32_t seed = 0;
    bool json = false;
    std::vector<std::string> stop;
};

int run_complete(const complete_opts & o) {
    const char * cmd = "complete";
    std::string prompt = o.prompt;
    std::string error;
    if (!o.file.empty() && !read_text_file(o.file, prompt, error)) {
        return fail_input(cmd, error);
    }
    if (o.n_predict < -1 || o.n_predict > 1000000) {
        return fail_input(cmd, "-n " + std::to_string(o.n_predict) + " out of range [-1, 1000000]");
    }
    if (o.temp < 0.0f || o.temp > 100.0f) {
        return fail_input(cmd, "--temp " + std::to_string(o.temp) + " out of range [0, 100]");
    }
    if (o.top_p <= 0.0f || o.top_p > 1.0f) {
        return fail_input(cmd, "--top-p " + std::to_string(o.top_p) + " out of range (0, 1]");
    }
    if (o.top_k < 0) {
        return fail_input(cmd, "--top-k " + std::to_string(o.top_k) + " must be >= 0");
    }
    method_spec ms;
    runner rn;
    if (const int status = open_request_runner(cmd, o.req, ms, rn); status != 0) {
        return status;
    }
    const model & m = *rn.target.model;
    request rq;
    rq.prompt = m.tokenize(prompt, true, false);
    warn_past_train_ctx(cmd, m, (int32_t) rq.prompt.size(), 0);
    rq.gen.n_predict = o.n_predict;
    rq.gen.sampling = {o.temp, o.top_k, o.top_p, o.seed};
    rq.gen.stop = o.stop;
    if (!o.json) {
        rq.gen.on_text = [](std::string_view s) {
            fwrite(s.data(), 1, s.size(), stdout);
            fflush(stdout);
            return true;
        };
    }
    generate_result r;
    if (const int status = run_request(cmd, rn, ms, rq, r); status != 0) {
        return status;
    }
    if (o.json) {
        nlohmann::json j = result_json(r, *rn.ctx, ms);
        j["draft_model"] = rn.params.draft_model_path;
        printf("%s\n", j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
    } else {
        printf("\n");
    }
    return 0;
}

} // namespace

command cmd_complete_add(CLI::App & app) {
    auto o = std::make_shared<complete_opts>();
    CLI::App * sub = app.add_subcommand("complete", "continue a prompt (greedy by default)");
    add_request_options(sub, o->req,
                        "decoding method (below)");
    auto * p = sub->add_option("-p,--prompt", o->prompt, "prompt text");
    auto * f = sub->add_option("-f,--file", o->file, "read the prompt from a file");
    p->excludes(f);
    sub->add_option("-n,--n-predict", o->n_predict, "most tokens to generate (-1 = until end of text)")->capture_default_str();
    sub->add_option("--temp", o->temp, "sampling temperature (0 = greedy)")->capture_default_str();
    sub->add_option("--top-k", o->top_k, "sample from the k most likely tokens (0 = all)")->capture_default_str();
    sub->add_option("--top-p", o->top_p, "nucleus sampling mass (1 = off)")->capture_default_str();
    sub->add_option("--seed", o->seed, "sampling seed")->capture_default_str();
    sub->add_option("--stop", o->stop, "stop string (repeatable)");
    sub->add_flag("--json", o->json, "print one JSON object with the text and statistics");
    sub->callback([sub, p, f] {
        if (p->count() == 0 && f->count() == 0) {
            throw CLI::RequiredError("one of --prompt or --file");
        }
    });
    return {sub, [o] { return run_complete(*o); }};
}

} // namespace editspec::cli
