// The speculative decoding loop: draft → one batch over the tree → verify → keep the accepted path
// in the KV cache → commit. The batch layout is the engine's (context_tree_batch, engine.h).
#include "editspec/decoder.h"
#include "editspec/clock.h"
#include "editspec/log.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>

namespace editspec {

namespace {

// one request's loop state
struct spec_loop {
    context & ctx;
    const generate_params & gp;
    const spec_params & sp;
    std::span<drafter_i * const> drafters;
    generate_result & r;
    accept_stats & stats;

    spec_loop(context & ctx, const generate_params & gp, const spec_params & sp, std::span<drafter_i * const> drafters,
              generate_result & r, accept_stats & stats, int32_t n_batch)
        : ctx(ctx), gp(gp), sp(sp), drafters(drafters), r(r), stats(stats), b(n_batch, ctx.n_seq_max()) {}

    batch b;
    token_vec history;      // every committed token
    size_t n_prompt = 0;    // of those, the prompt's
    llama_pos n_past = 0;   // tokens of sequence 0 in the KV cache
    token_vec pending;      // committed, not yet in the KV cache; the last is the next pass's root
    int32_t tree_cap = 0;   // most nodes drafters may offer
    bool chain_only = true;

    draft_tree tree;                    // this pass's
    std::vector<int32_t> parents;
    tree_pass tp;
    verify_input vin;
    bool argmax = false;                // the verifier reads each row's argmax only (greedy, unconstrained)
    std::vector<uint8_t> ckpt;          // context::checkpoints(): the state before this pass (empty = none saved)
    int64_t n_ckpt = 0;                 // checkpoints saved, and the ms they and their loads took
    double ckpt_ms = 0.0;
};

// under a constraint, the nodes it refuses (and their subtrees) leave the tree before sizing: the
// verifier's choice is always a token the constraint allows, so they could never be accepted, and
// the pass is cheaper without them (a snippet's deleted lines, which Reuse drafts from the file)
void step_prune(spec_loop & s) {
    const std::span<const llama_token> out = std::span<const llama_token>(s.history).subspan(s.n_prompt);
    token_vec path;
    std::vector<bool> keep(s.tree.nodes.size(), false);
    for (size_t i = 0; i < s.tree.nodes.size(); i++) {
        const draft_node & nd = s.tree.nodes[i];
        if (nd.parent >= 0 && !keep[(size_t) nd.parent]) continue;
        path.assign(out.begin(), out.end());
        size_t at = path.size();
        for (int32_t a = nd.parent; a >= 0; a = s.tree.nodes[(size_t) a].parent) path.insert(path.begin() + (ptrdiff_t) at, s.tree.nodes[(size_t) a].token);
        keep[i] = s.gp.constraint->allows(path, nd.token);
    }
    s.tree = s.tree.kept(keep);
}

// the drafters offer (each with what the others left), the sizing keeps what pays, the drafters
// hear what was kept
void step_draft(spec_loop & s) {
    s.tree.clear();
    for (drafter_i * d : s.drafters) {
        const int32_t budget = s.tree_cap - s.tree.size();
        if (budget <= 0) break;
        d->propose(s.history, s.tree, budget);
    }
    bool offered[DRAFT_SOURCE_COUNT] = {};
    for (const draft_node & nd : s.tree.nodes) offered[nd.source] = true;
    for (int src = 0; src < DRAFT_SOURCE_COUNT; src++) s.r.by_source[src].n_offered += offered[src];
    if (s.gp.constraint) step_prune(s);

    // no position past the cache, no token past n_predict; every node takes a KV cell
    const llama_pos root_pos = s.n_past + (llama_pos) s.pending.size() - 1;
    pass_shape shape;
    shape.max_depth = s.ctx.n_ctx() - 1 - root_pos;
    if (s.gp.n_predict >= 0) {
        shape.max_depth = std::min<int32_t>(shape.max_depth, s.gp.n_predict - (int32_t) s.r.tokens.size() - 1);
    }
    shape.max_depth = std::max(0, shape.max_depth);
    shape.max_nodes = std::max(0, s.ctx.n_ctx() - 1 - root_pos);
    shape.max_leaves = std::max(1, s.ctx.n_seq_max() - 1);
    shape.chain_only = s.chain_only;
    if (s.ctx.owner().facts().recurrent) {
        // a recurrent state takes back a chain's rejected tail, as far as its snapshots go, or goes back
        // to a checkpoint (step_keep)
        shape.max_nodes = std::min(shape.max_nodes, s.ctx.checkpoints() ? CONTEXT_RS_ROLLBACK : s.ctx.rollback_max());
        shape.max_depth = std::min(shape.max_depth, shape.max_nodes);
        shape.max_leaves = 1;
        shape.chain_only = true;
    }
    shape.depth = s.n_past;
    // a checkpoint's save and (at the rejections so far) load are a drafted pass's price too
    if (s.n_ckpt > 0) shape.draft_extra_ms = s.ckpt_ms / (double) s.n_ckpt;
    shape.step_tokens = (int32_t) s.pending.size() - 1; // the root's own pass carries those (a prompt's end, at first)
    shape.step_prompt = shape.step_tokens;
    if (s.ctx.is_view()) {
        // the step beside this request, as the last one was (step.h): each other request yields a token
        const step_load others = s.ctx.step_others();
        shape.step_tokens += others.tokens;
        shape.step_yield = (float) others.requests;
        for (const pass_part & p : others.parts) shape.step_prompt += std::max(0, p.tokens - p.outputs);
        if (s.sp.cost) shape.step_depth_ms = s.sp.cost->t_depth_extra(others.parts);
    }
    s.tree = tree_for_pass(s.tree, s.sp, s.stats, shape);
    for (drafter_i * d : s.drafters) {
        d->sized(s.tree);
    }
}

// one batch: the pending tokens and the tree
bool step_decode(spec_loop & s) {
    s.parents.clear();
    token_vec tokens;
    for (const draft_node & nd : s.tree.nodes) {
        s.parents.push_back(nd.parent);
        tokens.push_back(nd.token);
    }
    s.tp = context_tree_batch(s.ctx, s.b, s.pending, s.n_past, tokens, s.parents);
    s.ckpt.clear();
    if (s.ctx.checkpoints() && !tokens.empty()) {
        // the state before the pass, for a rejected draft to go back to (step_keep)
        const auto tc = clock_type::now();
        s.ckpt.resize(s.ctx.state_size(true));
        s.ckpt.resize(s.ctx.state_get(s.ckpt.data(), s.ckpt.size(), true));
        const double ms = ms_since(tc);
        s.r.checkpoint_ms += ms;
        s.ckpt_ms += ms;
        s.n_ckpt++;
        if (s.ckpt.empty()) {
            s.r.stop = STOP_REASON_ERROR;
            s.r.error = "recurrent state: the checkpoint before a pass failed";
            return false;
        }
    }
    const auto t0 = clock_type::now();
    if (!s.ctx.decode(s.b, s.argmax)) {
        if (s.ctx.cancelled()) {
            s.r.stop = STOP_REASON_CALLBACK; // the request was cancelled (context::set_cancel)
            return false;
        }
        s.r.stop = STOP_REASON_ERROR;
        s.r.error = "decode failed at position " + std::to_string(s.n_past);
        return false;
    }
    const double ms = ms_since(t0);
    s.r.decode_ms += ms;
    if (s.sp.cost) {
        const double model_ms = s.sp.cost->t(s.tp.n_pending + s.tp.n_nodes, s.n_past);
        s.r.decode_model_ms += model_ms;
        const int32_t b = cost_depth_bucket(s.n_past);
        s.r.decode_ms_at[b] += ms;
        s.r.decode_model_ms_at[b] += model_ms;
    }
    s.r.target_passes++;
    s.r.draft_tokens += s.tp.n_nodes;
    return true;
}

verify_result step_verify(spec_loop & s, rng_state & rng) {
    verify_input & vin = s.vin;
    vin.tree = &s.tree;
    vin.n_vocab = s.ctx.owner().facts().n_vocab;
    vin.n_out = s.r.tokens.size();
    vin.root_logits = nullptr;
    vin.node_logits.clear();
    vin.root_argmax = -1;
    vin.node_argmax.clear();
    if (s.ctx.argmax_only()) {
        // the decode handed back each row's argmax (engine_argmax_outputs): no logits to read
        vin.root_argmax = s.ctx.argmax(s.tp.n_pending - 1);
        vin.node_argmax.resize(s.tp.n_nodes);
        for (int32_t i = 0; i < s.tp.n_nodes; i++) vin.node_argmax[i] = s.ctx.argmax(s.tp.n_pending + i);
    } else {
        vin.root_logits = s.ctx.logits(s.tp.n_pending - 1);
        vin.node_logits.resize(s.tp.n_nodes);
        for (int32_t i = 0; i < s.tp.n_nodes; i++) vin.node_logits[i] = s.ctx.logits(s.tp.n_pending + i);
    }
    vin.constraint = s.gp.constraint;
    vin.out = std::span<const llama_token>(s.history).subspan(s.n_prompt);
    vin.lossy_ok.clear();
    if (s.sp.lossy_ok) {
        for (const draft_node & nd : s.tree.nodes) vin.lossy_ok.push_back(s.sp.lossy_ok(nd) ? 1 : 0);
    }
    return verify_tree(vin, s.sp.verify, rng);
}

// the target's margin at the end of the accepted path (tiny margins are where batch-order rounding
// could flip an argmax), and at EDITSPEC_LOG=debug the tree
void log_pass(const spec_loop & s, const verify_result & vr) {
    const int32_t k = (int32_t) vr.accepted.size();
    const float * l = k > 0 ? s.vin.node_logits[vr.accepted.back()] : s.vin.root_logits;
    float top1 = -INFINITY, top2 = -INFINITY;
    for (int32_t v = 0; v < s.vin.n_vocab; v++) {
        if (l[v] > top1) { top2 = top1; top1 = l[v]; } else if (l[v] > top2) { top2 = l[v]; }
    }
    std::string t, a;
    char buf[32];
    for (const draft_node & nd : s.tree.nodes) {
        snprintf(buf, sizeof(buf), " %d:%d", nd.token, nd.parent);
        t += buf;
    }
    for (int32_t x : vr.accepted) {
        snprintf(buf, sizeof(buf), " %d", x);
        a += buf;
    }
    ES_LOG_DEBUG("spec: n_past %d pending %d nodes %d leaves %d accepted %d token %d margin %.3g\n"
                 "spec: tree%s\nspec: accepted%s\n",
                 s.n_past, s.tp.n_pending, s.tp.n_nodes, s.tp.n_leaves, k, vr.token, top1 - top2, t.c_str(), a.c_str());
}

// A rejected draft in a state without rollback (context::checkpoints): the state goes back to before
// the pass, and the pass's pending and accepted tokens go to the front of the next pass, as an
// out-of-order path does below (no pass of their own: on Qwen3-Coder-Next's layers 1.41x ar against
// 1.33x for llama-server's way, a decode of them at once; docs/results/checkpoints). Where that front
// would outgrow a tree, it is decoded now, without outputs, so that the next pass's front stays one token
bool step_keep_checkpoint(spec_loop & s, const verify_result & vr) {
    const auto tc = clock_type::now();
    const bool back = s.ctx.state_set(s.ckpt.data(), s.ckpt.size(), true) == s.ckpt.size() && s.ctx.kv_rm(0, s.n_past, -1);
    const double ms = ms_since(tc);
    s.r.checkpoint_ms += ms;
    s.ckpt_ms += ms;
    if (!back) {
        s.r.stop = STOP_REASON_ERROR;
        s.r.error = "recurrent state: going back to the checkpoint at position " + std::to_string(s.n_past) + " failed";
        return false;
    }
    for (int32_t a : vr.accepted) s.pending.push_back(s.tree.nodes[a].token);
    s.pending.push_back(vr.token);
    // (the front, a root and a chain within CONTEXT_RS_PASS_MAX: the passes check-exact checks)
    const int32_t n_front = (int32_t) s.pending.size() - 1;
    if (n_front <= std::min(s.tree_cap, CONTEXT_RS_PASS_MAX - 1 - CONTEXT_RS_ROLLBACK)) return true;
    const auto t0 = clock_type::now();
    const bool ok = context_prefill(s.ctx, s.b, std::span<const llama_token>(s.pending).first(n_front), s.n_past, 0);
    s.r.decode_ms += ms_since(t0);
    s.r.target_passes++;
    if (!ok) {
        s.r.stop = s.ctx.cancelled() ? STOP_REASON_CALLBACK : STOP_REASON_ERROR;
        s.r.error = s.ctx.cancelled() ? "" : "decode failed at position " + std::to_string(s.n_past);
        return false;
    }
    s.n_past += n_front;
    s.pending.erase(s.pending.begin(), s.pending.begin() + n_front);
    return true;
}

// KV: sequence 0 keeps the pending tokens and, when its cells directly follow them, the accepted
// path. A path on other rows would leave holes between its cells; filling those later changes the
// order of the attention sums and so the logits' last bits, which can flip an argmax (the output
// must equal generate_ar's). Such a path is decoded again at the front of the next pass instead.
bool step_keep(spec_loop & s, const verify_result & vr) {
    const int32_t k = (int32_t) vr.accepted.size();
    if (!s.ckpt.empty() && k < s.tp.n_nodes) return step_keep_checkpoint(s, vr);
    bool in_order = true;
    for (int32_t i = 0; i < k; i++) in_order = in_order && vr.accepted[i] == i;
    const int32_t k_kept = in_order ? k : 0;
    if (!context_tree_keep(s.ctx, s.tp, k_kept)) {
        s.r.stop = STOP_REASON_ERROR;
        s.r.error = "KV cache: partial removal refused (recurrent model?)";
        return false;
    }
    s.n_past += s.tp.n_pending + k_kept;
    s.pending.clear();
    for (int32_t i = k_kept; i < k; i++) s.pending.push_back(s.tree.nodes[vr.accepted[i]].token);
    s.pending.push_back(vr.token);
    return true;
}

// the accepted tokens and the target's own go to the output and the drafters; false once output stops
bool step_commit(spec_loop & s, const verify_result & vr, output_sink & sink) {
    const size_t before = s.history.size();
    for (int32_t a : vr.accepted) s.history.push_back(s.tree.nodes[a].token);
    s.history.push_back(vr.token);
    bool running = true;
    for (size_t i = before; i < s.history.size() && running; i++) running = sink.push(s.history[i]);
    const std::span<const llama_token> committed(s.history.data() + before, s.history.size() - before);
    for (drafter_i * d : s.drafters) d->accept(committed);
    return running;
}

} // namespace

generate_result generate_spec(context & ctx, std::span<const llama_token> prompt, const generate_params & gp,
                              const spec_params & sp, std::span<drafter_i * const> drafters) {
    generate_result r;
    if (!generate_check_prompt(ctx, prompt, r, gp.constraint, gp.sampling)) {
        return r;
    }
    if (gp.constraint && !sp.verify.forced && sp.verify.policy != VERIFY_POLICY_GREEDY) {
        r.stop = STOP_REASON_ERROR;
        r.error = std::string("a constrained request verifies greedily, not with the ") + verify_policy_name(sp.verify.policy) +
                  " policy";
        return r;
    }
    if (sp.draft_max == 0 && !sp.cost && !drafters.empty()) {
        r.stop = STOP_REASON_ERROR;
        r.error = "spec_params: no cost model and no fixed draft size";
        return r;
    }
    accept_stats local_stats;
    // a pass holds the pending tokens (at most a previous tree's depth + 1) and the tree
    const int32_t tree_cap = std::min(sp.draft_max > 0 ? sp.draft_max : sp.tree_max, (ctx.n_batch() - 1) / 2);
    // the first pass holds the prompt's uncached end as its pending tokens, the tree after them
    // (a head drafter reads the whole prompt's states at begin(): the prompt goes in before it)
    const bool whole_prompt_first = std::any_of(drafters.begin(), drafters.end(), [](const drafter_i * d) { return d->follows_target(); });
    // (a state that goes back to a checkpoint would decode a rejected first pass's tail again: 1)
    const int32_t tail_max = whole_prompt_first || ctx.checkpoints() ? 1 : std::max(1, ctx.n_batch() - tree_cap - 1);
    spec_loop s(ctx, gp, sp, drafters, r, sp.stats ? *sp.stats : local_stats,
                std::max<int32_t>(2 * tree_cap + 1, std::min<int32_t>(ctx.n_batch(), (int32_t) prompt.size() + tree_cap)));
    s.tree_cap = tree_cap;
    // Exact greedy verification checks one chain: a node off the tree's first chain attends across
    // the masked cells of earlier siblings, which shifts the order of the attention sums, so its
    // logits can differ in the last bits from decoding its path alone (docs/exactness.md).
    s.chain_only = !verify_policy_is_lossy(sp.verify.policy);

    // prefill all but the prompt's uncached end, which the first pass decodes before its tree: its last
    // token is the first pass's root, so the first output token is drafted like any other (generate_ar
    // leaves the same end to its first pass)
    const auto t0 = clock_type::now();
    int32_t n_tail = 1;
    if (!generate_prefill(ctx, s.b, prompt, gp.prompt_cache, r, tail_max, &n_tail)) {
        return r;
    }
    for (drafter_i * d : drafters) {
        d->begin(prompt); // a draft model prefills the prompt too: prompt time
    }
    r.prompt_ms = ms_since(t0);

    s.history.assign(prompt.begin(), prompt.end());
    s.n_prompt = prompt.size();
    s.n_past = (llama_pos) prompt.size() - n_tail;
    s.pending.assign(prompt.end() - n_tail, prompt.end());
    rng_state rng(gp.sampling.seed);
    output_sink sink(ctx.owner(), gp, r);
    const bool debug = log_get_level() <= LOG_LEVEL_DEBUG;
    // greedy verification reads one token a row (the debug log's margins read the logits)
    s.argmax = sp.verify.policy == VERIFY_POLICY_GREEDY && !gp.constraint && !debug;
    const auto t1 = clock_type::now();
    bool running = gp.n_predict != 0;
    if (!running) r.stop = STOP_REASON_MAX_TOKENS;
    while (running) {
        if (s.n_past + (llama_pos) s.pending.size() - 1 >= ctx.n_ctx()) {
            r.stop = STOP_REASON_CONTEXT;
            break;
        }
        const auto td = clock_type::now();
        step_draft(s);
        r.draft_ms += ms_since(td);
        if (!step_decode(s)) break;
        const verify_result vr = step_verify(s, rng);
        const bool first_pass = r.first_pass_ms == 0.0;
        if (first_pass) r.first_pass_ms = ms_since(t1);
        if (vr.token < 0) {
            r.stop = STOP_REASON_ERROR;
            r.error = "the constraint allows no token after " + std::to_string(r.tokens.size() + vr.accepted.size()) + " tokens";
            break;
        }
        if (debug) log_pass(s, vr);
        accept_stats_record_pass(s.stats, s.tree, vr.accepted, r.by_source, r.by_proposer);
        r.accepted += (int64_t) vr.accepted.size();
        if (!step_keep(s, vr)) break;
        running = step_commit(s, vr, sink);
        if (first_pass) r.first_pass_tokens = (int32_t) r.tokens.size();
    }
    sink.finish();
    r.gen_ms = ms_since(t1);
    if (r.stop != STOP_REASON_ERROR) {
        // sequence 0 holds the prompt and the answer so far: a next turn that extends them reuses it all
        ctx.set_cached_prompt(std::span<const llama_token>(s.history).first((size_t) s.n_past));
    }
    return r;
}

} // namespace editspec
