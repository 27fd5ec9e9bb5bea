// The speculative decoding loop: draft → one batch over the tree → verify → keep the accepted path.
//
// Batch layout of one pass (n = tokens committed to the KV cache, L = leaves of the tree):
//
//   row      token             pos          seq ids
//   0..P-1   pending tokens    n .. n+P-1   {0, 1 .. L}   committed, not yet in the KV cache; the
//                                                         last one (row P-1, position r) is the root
//   P+i      tree node i       r + d(i)     {j : leaf j-1 lies under node i}
//
// P is 1 except after a step that accepted a path off the first rows (see "KV" below).
//
// Every path root → leaf j-1 is sequence j, so attention sees exactly that path's ancestors
// (llama.cpp has no custom mask; examples/lookahead does the same). Sequences that share a token
// must hold the same positions, so the committed prefix is first copied into each path's sequence
// (metadata only in a unified cache). A tree with one leaf uses sequence 0 alone.
#include "editspec/decoder.h"
#include "editspec/log.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>

namespace editspec {

using clock_type = std::chrono::steady_clock;

static double ms_since(clock_type::time_point t0) {
    return std::chrono::duration<double, std::milli>(clock_type::now() - t0).count();
}

// the target's own choice at a node under replay: the reference token at that output position
static verify_result verify_replay(const draft_tree & tree, const generate_params & gp, const model & m, size_t n_out) {
    verify_result r;
    r.recovered = false;
    int32_t cur = -1;
    size_t pos = n_out;
    while (true) {
        const llama_token want = generate_replay_token(gp, m, pos);
        const int32_t c = tree.find_child(cur, want);
        if (c < 0) {
            r.token = want;
            r.recovered = false;
            for (const draft_node & nd : tree.nodes) {
                if (nd.parent == cur) { r.recovered = true; break; }
            }
            return r;
        }
        r.accepted.push_back(c);
        cur = c;
        pos++;
    }
}

generate_result generate_spec(context & ctx, std::span<const llama_token> prompt, const generate_params & gp,
                              const spec_params & sp, std::span<drafter_i * const> drafters) {
    generate_result r;
    if (!generate_check_prompt(ctx, prompt, r)) {
        return r;
    }
    if (sp.draft_max == 0 && !sp.cost) {
        r.stop = STOP_REASON_ERROR;
        r.error = "spec_params: no cost model and no fixed draft size";
        return r;
    }
    const model & m = ctx.owner();
    const int32_t n_vocab = m.facts().n_vocab;
    const int32_t n_seq_max = ctx.n_seq_max();
    const int32_t max_leaves = std::max(1, n_seq_max - 1);
    // a pass holds the pending tokens (at most a previous tree's depth + 1) and the tree
    const int32_t tree_cap = std::min(sp.draft_max > 0 ? sp.draft_max : sp.tree_max, (ctx.n_batch() - 1) / 2);

    static const bool debug = std::getenv("EDITSPEC_DECODE_DEBUG") != nullptr;
    // Exact greedy verification checks one chain. A node off the tree's first chain attends to
    // its ancestors across the cells of earlier siblings; those masked cells shift the order of
    // the attention sums, so its logits can differ in the last bits from decoding its path alone
    // (and a quantized model can turn that into a different argmax). Its parent's logits are
    // exact, so accepting it would give the same token as the bonus token of the chain without
    // it: in exact mode a tree is no better than its likeliest chain (docs/exactness.md).
    const bool chain_only = sp.exact && !verify_policy_is_lossy(sp.verify.policy);
    accept_stats local_stats;
    accept_stats & stats = sp.stats ? *sp.stats : local_stats;

    ctx.kv_clear();
    batch b(std::max<int32_t>(2 * tree_cap + 1, std::min<int32_t>(ctx.n_batch(), (int32_t) prompt.size())), n_seq_max);

    // prefill all but the last prompt token, which is the first pass's root: the first output
    // token is drafted like any other (as generate_ar, which also decodes it in its first pass)
    auto t0 = clock_type::now();
    if (!context_prefill(ctx, b, prompt.first(prompt.size() - 1), 0, 0)) {
        r.stop = STOP_REASON_ERROR;
        r.error = "prompt decode failed";
        return r;
    }
    // drafters read the prompt too (a draft model prefills it): prompt time
    for (drafter_i * d : drafters) {
        d->begin(prompt);
    }
    r.prompt_ms = ms_since(t0);

    token_vec history(prompt.begin(), prompt.end());
    rng_state rng(gp.sampling.seed);
    output_sink sink(m, gp, r);
    auto t1 = clock_type::now();

    llama_pos n_past = (llama_pos) prompt.size() - 1; // tokens of sequence 0 in the KV cache
    token_vec pending = {prompt.back()};              // committed, not yet in the KV cache
    bool running = gp.n_predict != 0;
    if (!running) {
        r.stop = STOP_REASON_MAX_TOKENS;
    }

    draft_tree tree;
    std::vector<std::vector<llama_seq_id>> node_seqs;
    std::vector<llama_seq_id> root_seqs;
    std::vector<int32_t> depth;
    verify_input vin;

    while (running) {
        const int32_t n_pending = (int32_t) pending.size();
        // the root (last pending token) sits at position n_past + n_pending - 1
        const llama_pos root_pos = n_past + n_pending - 1;
        if (root_pos >= ctx.n_ctx()) {
            r.stop = STOP_REASON_CONTEXT;
            break;
        }
        // ---- draft
        const auto td = clock_type::now();
        tree.clear();
        for (drafter_i * d : drafters) {
            const int32_t budget = tree_cap - tree.size();
            if (budget <= 0) break;
            d->propose(history, tree, budget);
        }
        {
            bool offered[DRAFT_SOURCE_COUNT] = {};
            for (const draft_node & nd : tree.nodes) offered[nd.source] = true;
            for (int s = 0; s < DRAFT_SOURCE_COUNT; s++) r.by_source[s].n_offered += offered[s];
        }
        // no position past the cache, no token past n_predict; every node takes a KV cell
        pass_shape shape;
        shape.max_depth = ctx.n_ctx() - 1 - root_pos;
        if (gp.n_predict >= 0) {
            shape.max_depth = std::min<int32_t>(shape.max_depth, gp.n_predict - (int32_t) r.tokens.size() - 1);
        }
        shape.max_depth = std::max(0, shape.max_depth);
        shape.max_nodes = std::max(0, ctx.n_ctx() - 1 - root_pos);
        shape.max_leaves = max_leaves;
        shape.chain_only = chain_only;
        tree = tree_for_pass(tree, sp, stats, shape);
        for (drafter_i * d : drafters) {
            d->sized(tree);
        }
        r.draft_ms += ms_since(td);

        // ---- one pass over the pending tokens and the tree
        const int32_t n_nodes = tree.size();
        const std::vector<int32_t> leaves = tree.leaves();
        const bool multi = leaves.size() > 1;
        depth.assign(n_nodes, 0);
        node_seqs.assign(n_nodes, {});
        root_seqs.assign(1, 0);
        for (int32_t i = 0; i < n_nodes; i++) {
            depth[i] = tree.nodes[i].parent < 0 ? 1 : depth[tree.nodes[i].parent] + 1;
        }
        if (multi) {
            for (size_t j = 0; j < leaves.size(); j++) {
                const llama_seq_id s = (llama_seq_id) j + 1;
                root_seqs.push_back(s);
                for (int32_t i = leaves[j]; i >= 0; i = tree.nodes[i].parent) {
                    node_seqs[i].push_back(s);
                }
                ctx.kv_cp(0, s, -1, -1);
            }
        }
        b.clear();
        for (int32_t i = 0; i < n_pending; i++) {
            b.add(pending[i], n_past + i, root_seqs, i == n_pending - 1);
        }
        for (int32_t i = 0; i < n_nodes; i++) {
            const bool ok = multi ? b.add(tree.nodes[i].token, root_pos + depth[i], node_seqs[i], true)
                                  : b.add(tree.nodes[i].token, root_pos + depth[i], {0}, true);
            ES_ASSERT(ok);
        }
        const auto tdec = clock_type::now();
        if (!ctx.decode(b)) {
            r.stop = STOP_REASON_ERROR;
            r.error = "decode failed at position " + std::to_string(n_past);
            break;
        }
        r.decode_ms += ms_since(tdec);
        if (sp.cost) r.decode_model_ms += sp.cost->t(n_pending + n_nodes);
        r.target_passes++;
        r.draft_tokens += n_nodes;

        // ---- verify
        verify_result vr;
        if (gp.replay) {
            vr = verify_replay(tree, gp, m, r.tokens.size());
        } else {
            vin.tree = &tree;
            vin.n_vocab = n_vocab;
            vin.root_logits = ctx.logits(n_pending - 1);
            vin.node_logits.resize(n_nodes);
            for (int32_t i = 0; i < n_nodes; i++) {
                vin.node_logits[i] = ctx.logits(n_pending + i);
            }
            vin.lossy_ok.clear();
            if (sp.lossy_ok) {
                vin.lossy_ok.resize(n_nodes);
                for (int32_t i = 0; i < n_nodes; i++) vin.lossy_ok[i] = sp.lossy_ok(tree.nodes[i]) ? 1 : 0;
            }
            vr = verify_tree(vin, sp.verify, rng);
        }
        const int32_t k = (int32_t) vr.accepted.size();
        if (debug) {
            // margin of the target's choice at the end of the accepted path: tiny margins are
            // where batch-order rounding could flip an argmax
            const float * l = gp.replay ? nullptr : (k > 0 ? vin.node_logits[vr.accepted.back()] : vin.root_logits);
            float top1 = -INFINITY, top2 = -INFINITY;
            for (int32_t v = 0; l && v < n_vocab; v++) {
                if (l[v] > top1) { top2 = top1; top1 = l[v]; } else if (l[v] > top2) { top2 = l[v]; }
            }
            ES_LOG_INFO("spec: n_past %d pending %d nodes %d leaves %zu accepted %d token %d margin %.3g\n", n_past,
                        n_pending, n_nodes, leaves.size(), k, vr.token, top1 - top2);
            if (std::getenv("EDITSPEC_DECODE_DEBUG")[0] == '2') {
                std::string t;
                for (const draft_node & nd : tree.nodes) t += std::to_string(nd.token) + ":" + std::to_string(nd.parent) + " ";
                std::string a;
                for (int32_t x : vr.accepted) a += std::to_string(x) + " ";
                ES_LOG_INFO("spec: tree %s\nspec: accepted %s\n", t.c_str(), a.c_str());
            }
        }

        // ---- statistics
        accept_stats_record_pass(stats, tree, vr.accepted, r.by_source);
        r.accepted += k;

        // ---- KV: sequence 0 keeps the pending tokens and, when its cells directly follow them,
        // the accepted path. A path on other rows would leave holes between its cells; filling
        // those later changes the order of the attention sums and so the logits' last bits, which
        // can flip an argmax (the output must equal generate_ar's). Such a path is decoded again
        // at the front of the next pass instead.
        bool in_order = true;
        for (int32_t i = 0; i < k; i++) {
            in_order = in_order && vr.accepted[i] == i;
        }
        const int32_t k_kept = in_order ? k : 0;
        if (multi) {
            if (k_kept > 0) {
                // the first leaf lies under node k-1 when the path is rows 0..k-1
                ctx.kv_cp(1, 0, root_pos + 1, root_pos + 1 + k_kept);
            }
            for (size_t j = 0; j < leaves.size(); j++) {
                ctx.kv_rm((llama_seq_id) j + 1, -1, -1);
            }
        } else if (n_nodes > k_kept) {
            if (!ctx.kv_rm(0, root_pos + 1 + k_kept, -1)) {
                r.stop = STOP_REASON_ERROR;
                r.error = "KV cache: partial removal refused (recurrent model?)";
                break;
            }
        }
        n_past += n_pending + k_kept;
        pending.clear();
        for (int32_t i = k_kept; i < k; i++) {
            pending.push_back(tree.nodes[vr.accepted[i]].token);
        }
        pending.push_back(vr.token);

        // ---- commit
        const size_t hist_before = history.size();
        for (int32_t a : vr.accepted) {
            const llama_token t = tree.nodes[a].token;
            history.push_back(t);
            if (running && !sink.push(t)) running = false;
        }
        history.push_back(vr.token);
        if (running && !sink.push(vr.token)) running = false;
        const std::span<const llama_token> committed(history.data() + hist_before, history.size() - hist_before);
        for (drafter_i * d : drafters) {
            d->accept(committed);
        }
    }
    sink.finish();
    r.gen_ms = ms_since(t1);
    return r;
}

} // namespace editspec
