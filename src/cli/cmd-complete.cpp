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
    std::string model;
    std::string draft_model;    // --draft-model: drafts for the "sd" drafter
    draft_model_params draft;   // --gamma, --draft-p-min
    std::string method = "ar";  // --method: see methods.h
    std::string prompt;
    std::string file;
    int32_t n_predict = 128;
    float temp = 0.0f;
    int32_t top_k = 0;
    float top_p = 1.0f;
    uint32_t seed = 0;
    int32_t threads = 0;
    int32_t n_ctx = 4096;
    bool json = false;
    bool flash_attn = false;
    std::vector<std::string> stop;
};

bool read_file(const std::string & path, std::string & out, std::string & error) {
    std::ifstream f(path, std::ios::binary);
    if (!f) {
        error = "cannot read '" + path + "'";
        return false;
    }
    std::ostringstream ss;
    ss << f.rdbuf();
    out = ss.str();
    return true;
}

int run_complete(const complete_opts & o) {
    const char * cmd = "complete";
    std::string prompt = o.prompt;
    std::string error;
    if (!o.file.empty() && !read_file(o.file, prompt, error)) {
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
    if (o.threads < 0 || o.threads > 1024) {
        return fail_input(cmd, "--threads " + std::to_string(o.threads) + " out of range [0, 1024]");
    }
    if (o.n_ctx < 16 || o.n_ctx > (1 << 20)) {
        return fail_input(cmd, "--ctx-size " + std::to_string(o.n_ctx) + " out of range [16, 1048576]");
    }
    request_models rm;
    if (const int status = load_request_models(cmd, o.method, o.model, o.draft_model, o.draft, rm); status != 0) {
        return status;
    }
    const method_spec & ms = rm.ms;
    const model & m = *rm.target.model;
    context_params cp;
    cp.n_ctx = o.n_ctx;
    cp.n_threads = o.threads;
    cp.flash_attn = o.flash_attn;
    cp.n_seq_max = ms.is_ar() ? 1 : std::min(65, o.n_ctx); // trees: one sequence per leaf, up to 64 leaves
    auto ctx = context_create(m, cp, &error);
    if (!ctx) {
        return fail_runtime(cmd, error);
    }
    const token_vec tokens = m.tokenize(prompt, true, false);
    warn_past_train_ctx(cmd, m, (int32_t) tokens.size(), 0);

    generate_params gp;
    gp.n_predict = o.n_predict;
    gp.sampling = {o.temp, o.top_k, o.top_p, o.seed};
    gp.stop = o.stop;
    if (!o.json) {
        gp.on_text = [](std::string_view s) {
            fwrite(s.data(), 1, s.size(), stdout);
            fflush(stdout);
            return true;
        };
    }
    method_inputs in;
    in.target = &m;
    in.draft_model = rm.draft.model.get();
    in.draft_params = o.draft;
    in.draft_params.n_ctx = o.n_ctx;
    in.draft_params.n_threads = o.threads;
    generate_result r;
    if (const int status = generate_with_method(cmd, *ctx, tokens, gp, ms, in, r); status != 0) {
        return status;
    }
    if (o.json) {
        nlohmann::json j = result_json(r, *ctx, ms);
        j["draft_model"] = rm.draft_path;
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
    sub->add_option("-m,--model", o->model, "GGUF model file (default: $EDITSPEC_MODEL or the shipped model)");
    sub->add_option("--method", o->method,
                    "decoding method: ar, lookup, lookup-longest, sd (draft model), a+b (one tree), NAME@N (fixed cap), "
                    "NAME:POLICY")
        ->capture_default_str();
    sub->add_option("--draft-model", o->draft_model, "GGUF draft model with the target's vocabulary (sd, efficientedit; default: $EDITSPEC_DRAFT_MODEL, or the shipped draft model with the shipped target)");
    add_draft_options(sub, o->draft);
    auto * p = sub->add_option("-p,--prompt", o->prompt, "prompt text");
    auto * f = sub->add_option("-f,--file", o->file, "read the prompt from a file");
    p->excludes(f);
    sub->add_option("-n,--n-predict", o->n_predict, "most tokens to generate (-1 = until end of text)")->capture_default_str();
    sub->add_option("--temp", o->temp, "sampling temperature (0 = greedy)")->capture_default_str();
    sub->add_option("--top-k", o->top_k, "sample from the k most likely tokens (0 = all)")->capture_default_str();
    sub->add_option("--top-p", o->top_p, "nucleus sampling mass (1 = off)")->capture_default_str();
    sub->add_option("--seed", o->seed, "sampling seed")->capture_default_str();
    sub->add_option("-t,--threads", o->threads, "CPU threads (0 = all cores)")->capture_default_str();
    sub->add_option("-c,--ctx-size", o->n_ctx, "KV cache size in tokens")->capture_default_str();
    sub->add_option("--stop", o->stop, "stop string (repeatable)");
    sub->add_flag("--flash-attn", o->flash_attn, "use flash attention (faster on some machines, not bit-exact)");
    sub->add_flag("--json", o->json, "print one JSON object with the text and statistics");
    sub->callback([sub, p, f] {
        if (p->count() == 0 && f->count() == 0) {
            throw CLI::RequiredError("one of --prompt or --file");
        }
    });
    return {sub, [o] { return run_complete(*o); }};
}

} // namespace editspec::cli
