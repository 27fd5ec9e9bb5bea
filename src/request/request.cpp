// Requests: models, context and cost model set up once; each request runs its method.
#include "editspec/request.h"
#include "editspec/decoder.h"
#include "editspec/edit.h"
#include "editspec/log.h"

#include <algorithm>

namespace editspec {

// what an answer holds besides the code: a chat model's fence lines ("```python\n", "```\n") and the end
static constexpr int32_t ANSWER_FRAME_TOKENS = 8;

int32_t runner_n_seq_max(bool trees, bool recurrent, int32_t n_ctx) {
    return trees && !recurrent ? std::min(65, n_ctx) : 1;
}

bool runner_open(const runner_params & p, runner & out, std::string * error) {
    out.params = p;
    out.target = model_load(p.model_path);
    if (!out.target.model) {
        if (error) *error = out.target.error;
        return false;
    }
    // a draft model and a head file: on the target's vocabulary
    for (auto [path, slot] : {std::pair{&p.draft_model_path, &out.draft}, std::pair{&p.head_model_path, &out.head}}) {
        if (path->empty()) continue;
        *slot = model_load(*path);
        if (!slot->model) {
            if (error) *error = slot->error;
            return false;
        }
        if (!model_can_draft_for(*out.target.model, *slot->model, error)) {
            slot->model.reset();
            return false;
        }
    }
    for (const std::string & path : p.datastore_paths) {
        auto ds = std::make_unique<datastore>();
        if (!datastore_open(path, out.target.model.get(), *ds, error)) return false;
        out.datastore_ptrs.push_back(ds.get());
        out.datastores.push_back(std::move(ds));
    }
    for (const std::string & path : p.repo_datastore_paths) {
        auto ds = std::make_unique<datastore>();
        if (!datastore_open(path, out.target.model.get(), *ds, error)) return false;
        out.repo_datastore_ptrs.push_back(ds.get());
        out.datastores.push_back(std::move(ds));
    }
    out.ctx = runner_new_context(out, error);
    return out.ctx != nullptr;
}

std::unique_ptr<context> runner_new_context(const runner & rn, std::string * error) {
    context_params cp;
    cp.n_ctx = rn.params.n_ctx;
    cp.n_threads = rn.params.n_threads;
    cp.flash_attn = rn.params.flash_attn;
    cp.type_k = cp.type_v = rn.params.kv_type;
    cp.rs_snapshots = rn.params.rs_snapshots;
    cp.n_seq_max = runner_n_seq_max(rn.params.trees, rn.target.model->facts().recurrent, rn.params.n_ctx);
    return context_create(*rn.target.model, cp, error);
}

bool runner_cost(runner & rn, std::string * error) {
    if (!rn.cost.empty()) return true;
    if (!cost_model_get(*rn.ctx, rn.cost, error)) return false;
    if (rn.draft.model) {
        context_params cp;
        cp.n_ctx = rn.params.n_ctx;
        cp.n_threads = rn.params.n_threads;
        cp.flash_attn = rn.params.flash_attn;
        std::string why;
        auto dctx = context_create(*rn.draft.model, cp, &why);
        if (!dctx || !cost_model_get(*dctx, rn.draft_cost, &why)) {
            // drafts then run their whole length, as before the draft model's cost was known
            ES_LOG_WARN("draft model '%s': no cost model (%s)\n", rn.draft.model->path().c_str(), why.c_str());
            rn.draft_cost = {};
        }
    }
    return true;
}

void request_edit_tokens(const model & m, const std::string & instruction, const std::string & code, request & rq,
                         prompt_layout layout) {
    rq.prompt = m.tokenize(edit_prompt(m, instruction, code, layout), true, edit_prompt_parse_special(m));
    rq.original = edit_original_tokens(m, code);
    // an edit's answer rewrites the code: about as long as it (a chat model's fence and the end too)
    rq.n_answer = (int32_t) rq.original.size() + ANSWER_FRAME_TOKENS;
}

void request_apply_tokens(const model & m, const apply_input & in, request & rq, bool constrain, prompt_layout layout,
                          apply_view view) {
    rq.prompt = m.tokenize(apply_prompt(m, in, layout, view), true, apply_prompt_parse_special(m));
    rq.original = edit_original_tokens(m, in.code);
    rq.n_answer = request_apply_answer_tokens(m, in, rq.original);
    rq.constraint = constrain ? std::make_shared<apply_constraint>(m, in) : nullptr;
}

void request_prediction_tokens(const model & m, const std::string & prediction, request & rq) {
    rq.original = edit_original_tokens(m, prediction);
}

std::string request_over_context(const request & rq, int32_t n_ctx) {
    if ((int32_t) rq.prompt.size() + 1 < n_ctx) {
        return "";
    }
    return "the prompt is " + std::to_string(rq.prompt.size()) + " tokens and the context holds " + std::to_string(n_ctx);
}

int32_t request_apply_answer_tokens(const model & m, const apply_input & in, std::span<const llama_token> original,
                                    int32_t limit) {
    const int32_t n_file = (int32_t) original.size() + ANSWER_FRAME_TOKENS;
    if (limit > 0 && n_file > limit) return n_file;
    // the snippet's lines that are not the file's, and the file's lines it deletes
    const apply_alignment a = apply_align(in);
    std::string added, deleted;
    for (size_t j = 0; j < a.update.size(); j++) {
        if (a.anchor[j] < 0) added += a.update[j];
    }
    for (size_t i = 0; i < a.code.size(); i++) {
        if (a.dropped[i]) deleted += a.code[i];
    }
    const int32_t n_added = added.empty() ? 0 : (int32_t) m.tokenize(added, false, false).size();
    const int32_t n_deleted = deleted.empty() ? 0 : (int32_t) m.tokenize(deleted, false, false).size();
    return std::max(ANSWER_FRAME_TOKENS, n_file + n_added - n_deleted);
}

int32_t request_ctx_needed(const request & rq) {
    return (int32_t) rq.prompt.size() + rq.n_answer + 1;
}

std::string request_answer_room(const request & rq, int32_t n_ctx, int32_t n_predict, bool * over_ctx) {
    if (over_ctx) *over_ctx = false;
    if (rq.n_answer <= 0) return "";
    const int32_t need = request_ctx_needed(rq);
    if (need > n_ctx) {
        if (over_ctx) *over_ctx = true;
        return "the prompt is " + std::to_string(rq.prompt.size()) + " tokens and the whole answer about " +
               std::to_string(rq.n_answer) + " more (the file is " + std::to_string(rq.original.size()) +
               " tokens): " + std::to_string(need) + " tokens, and the context holds " + std::to_string(n_ctx);
    }
    if (n_predict >= 0 && n_predict < rq.n_answer) {
        return "the whole answer takes about " + std::to_string(rq.n_answer) + " tokens (the file is " +
               std::to_string(rq.original.size()) + ") and at most " + std::to_string(n_predict) + " may be generated";
    }
    return "";
}

bool runner_generate(runner & rn, const method_spec & ms, const request & rq, generate_result & r, std::string * error) {
    if (!ms.is_ar() && ms.draft_max == 0 && !runner_cost(rn, error)) {
        return false;
    }
    return runner_generate_in(rn, *rn.ctx, ms, rq, r, error);
}

bool runner_generate_in(const runner & rn, context & ctx, const method_spec & ms, const request & rq,
                        generate_result & r, std::string * error) {
    generate_params gen = rq.gen;
    if (rq.constraint) gen.constraint = rq.constraint.get();
    if (ms.is_ar() && !rq.forced) {
        r = generate_ar(ctx, rq.prompt, gen);
        return true;
    }
    const bool sized_by_cost = !ms.is_ar() && ms.draft_max == 0;
    if (sized_by_cost && rn.cost.empty()) {
        if (error) *error = "method '" + ms.name + "' sizes drafts with the cost model, and none was fetched";
        return false;
    }
    drafter_inputs in;
    in.original = rq.original;
    in.target = rn.target.model.get();
    in.target_ctx = &ctx;
    in.draft_model = rn.draft.model.get();
    in.head_model = rn.head.model.get();
    in.draft_params = rn.params.draft;
    in.draft_params.n_ctx = rn.params.n_ctx;
    in.draft_params.n_threads = rn.params.n_threads;
    if (sized_by_cost && !rn.draft_cost.empty() && in.draft_params.chain_p_min <= 0.0f) {
        // a draft pass pays while the chain's chance of acceptance times a target pass exceeds it
        in.draft_params.chain_p_min = (float) std::min(0.9, rn.draft_cost.t(1) / rn.cost.t(1));
    }
    in.datastores = rn.datastore_ptrs;
    in.repo_datastores = rq.repo_datastores.empty() ? std::span<const datastore * const>(rn.repo_datastore_ptrs) : rq.repo_datastores;
    in.cache = rq.cache;
    in.draft_ctx = rq.draft_ctx;
    in.draft_kept = rq.draft_kept;
    in.head = rq.head;
    in.settings = rn.params.settings;
    std::vector<std::unique_ptr<drafter_i>> owned;
    if (!method_make_drafters(ms, in, owned, error)) {
        return false;
    }
    std::vector<drafter_i *> drafters;
    for (auto & d : owned) drafters.push_back(d.get());
    spec_params sp;
    // greedy verification would ignore the temperature: sample unless a policy was named
    sp.verify.policy = (!ms.policy_set && rq.gen.sampling.temp > 0.0f) ? VERIFY_POLICY_SAMPLING : ms.policy;
    sp.verify.sampling = rq.gen.sampling;
    sp.verify.top_k = rn.params.settings.top_k;
    sp.verify.entropy_k = rn.params.settings.entropy_k;
    sp.verify.forced = rq.forced;
    sp.lossy_ok = method_lossy_ok(ms);
    sp.draft_max = ms.draft_max;
    sp.cost = sized_by_cost ? &rn.cost : nullptr;
    sp.stats = rq.stats;
    r = generate_spec(ctx, rq.prompt, gen, sp, drafters);
    for (const drafter_i * d : drafters) r.drafters += (r.drafters.empty() ? "" : "+") + std::string(d->name());
    if (!drafters.empty()) r.policy = verify_policy_name(sp.verify.policy);
    return true;
}

} // namespace editspec
