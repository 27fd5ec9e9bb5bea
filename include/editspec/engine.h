// editspec engine: a thin owner of libllama's model, context and batch.
//
//     editspec::model_load_result r = editspec::model_load("model.gguf");
//     if (!r.model) { fprintf(stderr, "%s\n", r.error.c_str()); return 2; }
//     editspec::context_params cp;            // n_ctx 4096, flash attention on (exact with our patch)
//     auto ctx = editspec::context_create(*r.model, cp, &err);
//     std::vector<llama_token> toks = r.model->tokenize("def f():", true, false);
//     editspec::batch b(512, 1);
//     for (int i = 0; i < (int) toks.size(); i++) b.add(toks[i], i, {0}, i + 1 == (int) toks.size());
//     if (!ctx->decode(b)) ...;
//     const float * logits = ctx->logits(b.size() - 1);   // [n_vocab]
//
// Threading: a model may be shared by several contexts; a context and its batches belong to one
// thread at a time. Raw llama_*_free calls live only in src/engine.
#pragma once

#include "editspec/tokenizer.h"

#include "llama.h"

#include <cstdint>
#include <atomic>
#include <functional>
#include <initializer_list>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <vector>

namespace editspec {

using token_vec = std::vector<llama_token>;

// ----------------------------------------------------------------------------
// model: weights + vocabulary, shared read-only

struct model_facts {
    std::string arch;          // general.architecture, e.g. "llama", "qwen2"
    std::string desc;          // llama_model_desc
    std::string chat_template; // empty = none
    int32_t n_vocab     = 0;
    int32_t n_ctx_train = 0;
    int32_t n_layer     = 0;
    int32_t n_embd      = 0;
    uint64_t n_params   = 0;
    llama_token bos = LLAMA_TOKEN_NULL;
    llama_token eos = LLAMA_TOKEN_NULL;
    llama_token eot = LLAMA_TOKEN_NULL;
    llama_token fim_pre = LLAMA_TOKEN_NULL;
    llama_token fim_suf = LLAMA_TOKEN_NULL;
    llama_token fim_mid = LLAMA_TOKEN_NULL;
    // fill in the middle as suffix-prefix-middle ([SUF] suffix [PRE] prefix [MID]; llama-server's
    // --spm-infill) rather than prefix-suffix-middle: GGUF key editspec.fim_order = "spm" (the shipped
    // target, whose middle then continues its prefix)
    bool fim_spm = false;
    bool add_bos = false;      // the tokenizer adds BOS when add_special is set
    // a recurrent state beside or instead of the KV cache (Mamba, Qwen3.5, Qwen3-Next, Granite 4 hybrids):
    // a pass's last tokens can leave it only as far back as the context keeps snapshots
    // (context::rollback_max)
    bool recurrent = false;
};

// text as llama_tokenize can take it: llama.cpp's tokenizers throw, uncaught, on a UTF-8 sequence above
// U+10FFFF (a lead byte F4 then 90-BF, or F5-F7), so each such lead byte becomes U+FFFD in out, as llama.cpp
// makes every other invalid byte; false (out untouched) when the text has none. model::tokenize calls it.
bool tokenizer_safe_text(std::string_view text, std::string & out);

class model : public tokenizer {
public:
    ~model() override;
    model(const model &) = delete;
    model & operator=(const model &) = delete;

    const model_facts & facts() const { return facts_; }
    const std::string & path() const { return path_; }
    llama_model * get() const { return model_; }
    const llama_vocab * vocab() const { return vocab_; }

    // add_special: BOS etc. as the model's tokenizer config says; parse_special: "<|...|>" in text
    // become control tokens
    token_vec tokenize(std::string_view text, bool add_special, bool parse_special) const;
    // special: render control tokens as text (otherwise they render as "")
    std::string token_to_piece(llama_token token, bool special = false) const;
    std::string detokenize(std::span<const llama_token> tokens, bool special = false) const;
    // end of generation: EOS, EOT or any other token the vocabulary marks as such
    bool is_eog(llama_token token) const;

    // the tokenizer the datastore sees (tokenizer.h)
    int32_t vocab_size() const override { return facts_.n_vocab; }
    std::string_view token_text(int32_t t) const override;
    std::vector<int32_t> tokenize_plain(std::string_view text) const override { return tokenize(text, false, false); }
    const std::string & tokenizer_source() const override { return path_; }

private:
    friend struct model_load_result model_load(const std::string & path, bool vocab_only);
    model() = default;

    llama_model * model_ = nullptr;
    const llama_vocab * vocab_ = nullptr;
    std::string path_;
    model_facts facts_;
};

struct model_load_result {
    std::unique_ptr<editspec::model> model; // null on error
    std::string error;            // one line naming the file and the problem
};

// Checks the file (exists, readable, GGUF magic, not truncated) before libllama sees it.
model_load_result model_load(const std::string & path, bool vocab_only = false);

// true when both vocabularies tokenize identically (same size, same token texts); used to accept a
// draft model for a target. On false, *why names the first difference.
bool model_vocab_compatible(const model & a, const model & b, std::string * why);
// model_vocab_compatible as a user reads it: false with *error "draft model 'D' cannot draft for
// target 'T': vocabularies differ (...)"
bool model_can_draft_for(const model & target, const model & draft, std::string * error);

// ----------------------------------------------------------------------------
// batch: tokens with positions, sequence ids and logits flags

//  i     token  pos  seq ids   logits
//  0     t0     p0   {0}       0
//  1     t1     p1   {0,1}     1
class batch {
public:
    batch(int32_t n_tokens_max, int32_t n_seq_max);
    ~batch();
    batch(const batch &) = delete;
    batch & operator=(const batch &) = delete;

    void clear() { b_.n_tokens = 0; }
    // returns false (and adds nothing) when the batch is full or seq_ids has too many ids
    bool add(llama_token token, llama_pos pos, std::span<const llama_seq_id> seq_ids, bool logits);
    bool add(llama_token token, llama_pos pos, std::initializer_list<llama_seq_id> seq_ids, bool logits) {
        return add(token, pos, std::span<const llama_seq_id>(seq_ids.begin(), seq_ids.size()), logits);
    }
    int32_t size() const { return b_.n_tokens; }
    int32_t capacity() const { return n_tokens_max_; }
    const llama_batch & get() const { return b_; }

private:
    llama_batch b_;
    int32_t n_tokens_max_;
    int32_t n_seq_max_;
};

// ----------------------------------------------------------------------------
// context: KV cache + compute state for one model

// a recurrent model's snapshots of its state a context keeps (llama.cpp's n_rs_seq): the longest draft
// it verifies, as llama-server sizes them for its drafters (--spec-draft-n-max); each costs one copy of the
// recurrent state per sequence (Qwen3.5-9B: 48 MB). Also the longest draft of a model whose state goes back
// by a checkpoint instead (context::checkpoints)
constexpr int32_t CONTEXT_RS_ROLLBACK = 16;
// the most tokens a pass of a recurrent model carries: a chain, and with checkpoints the tokens a rejected
// pass left to decode again before it (the decoder keeps that front within this); check-exact checks a
// recurrent model's passes to it
constexpr int32_t CONTEXT_RS_PASS_MAX = 64;

struct context_params {
    int32_t n_ctx      = 4096;  // tokens in the KV cache, 0 = from model
    int32_t n_batch    = 512;   // most tokens one decode() call may carry
    int32_t n_ubatch   = 512;   // physical batch
    int32_t n_threads  = 0;     // 0 = all cores (std::thread::hardware_concurrency)
    int32_t n_seq_max  = 1;     // sequence ids 0 .. n_seq_max-1 (trees use one per path, <= 256)
    bool    flash_attn = true;  // exact with our ggml patch (one per-row kernel), ~10% faster than off (docs/exactness.md)
    bool    kv_unified = true;  // one buffer for all sequences: needed for tree verification
    ggml_type type_k   = GGML_TYPE_F16; // KV cache types; F32 for exact shifts; Q8_0 (both) with flash
    ggml_type type_v   = GGML_TYPE_F16; // attention on the CPU: half the bytes, exact (kv_cache_type_parse)
    // a recurrent model's snapshots of its state (libllama's n_rs_seq, 0 .. CONTEXT_RS_ROLLBACK): its chains'
    // longest draft. 0 goes back by checkpoints instead (context::checkpoints): no snapshots' memory, and
    // a rejection loads the state and decodes its pass's accepted tokens again
    int32_t rs_snapshots = CONTEXT_RS_ROLLBACK;
};

// the KV cache types a user may pick (--cache-type): "f16" (the default) and "q8_0", the types the
// patched CPU attention keeps batch-invariant (a Q8_0 cache holds other values than F16's, so its
// answers may differ from an F16 cache's, and speculative output still equals its own autoregressive
// output). False with *error naming the value and the choices
bool kv_cache_type_parse(const std::string & name, ggml_type & out, std::string * error);

// one request's share of a pass: its tokens, after `depth` tokens of its own in the cache (what its
// rows' attention reads); a step holds one per request
struct pass_part {
    int32_t tokens  = 0;
    int32_t depth   = 0;
    int32_t outputs = 0; // rows with logits (a tree's nodes and its root); the rest are a prompt's or pending
};

// what the other requests put in a step beside a view's own batch
struct step_load {
    int32_t tokens   = 0;           // their tokens
    int32_t requests = 0;           // their batches
    std::vector<pass_part> parts;   // each one's tokens and depth
};

// What a view decodes through: a scheduler above this layer (step.h's step_engine, in the schedule
// layer) that batches several requests' passes into one llama_decode of a context it owns. The engine
// layer wraps libllama only; serving policy sits above it (src/layers.txt).
//
// A view's outputs of its last decode: each row's logits, either lent (pointers into the host context's
// own output buffer, no copy) or copied into the view's `copy`. The host lends only to a view whose
// reader cannot overlap its next step (a job on the host's own thread) and copies lent rows out before
// a step that does not carry their view; a view that decodes again is done with its last rows.
struct view_outputs {
    std::vector<const float *> row; // [rows of the last decode]: the row's logits [n_vocab], null = none
    std::vector<float> copy;        // [rows copied, n_vocab]: what the rows point into when not lent
    std::vector<llama_token> top;   // [rows] when the step handed back argmax outputs (row all null): each
                                    // row's argmax, -1 = none; empty when it handed back logits
};

class view_host {
public:
    // waits for the step that carries b, view `seq`'s rows (out); false when it failed or was cancelled.
    // argmax: the view reads each row's argmax only (context::decode)
    virtual bool view_decode(llama_seq_id seq, const llama_batch & b, const std::atomic<bool> * cancel, view_outputs & out,
                             bool argmax) = 0;
    // the view that owns `out` goes away: no row of it stays lent
    virtual void view_forget(view_outputs & out) = 0;
    // what the last step held beside view seq's own batch
    virtual step_load view_others(llama_seq_id seq) const = 0;
    // held by a view's KV operation: the shared context's cells never change during a step's decode
    virtual std::mutex & view_kv_mutex() const = 0;

protected:
    ~view_host() = default;
};

// A context either owns its llama_context, or is a view of a host's (context_view, view_host): then it
// has one sequence, 0, which is the host's region or stream for it, and decode() waits for the host's step.
class context {
public:
    ~context();
    context(const context &) = delete;
    context & operator=(const context &) = delete;

    // false on failure (the error is logged with llama_decode's status) or once cancelled. argmax: the
    // caller reads each row's argmax only (argmax(i)); with argmax outputs on (engine_argmax_outputs) the
    // decode then hands back those tokens and not the rows' logits (a view: when every request of its
    // step asked the same)
    bool decode(const batch & b, bool argmax = false);
    // a flag that, once true, makes decode() fail at once and cuts short a decode under way (the
    // request's client is gone); null = none. Not owned; must outlive its use
    void set_cancel(const std::atomic<bool> * cancel) { cancel_ = cancel; }
    bool cancelled() const { return cancel_ && cancel_->load(); }
    // called with every batch an owned context decodes, right after llama_decode succeeds (a
    // model-native head, llama-draft-mtp, reads the target's hidden states of each batch it sees,
    // prompt chunks included); empty = none. Not for a view
    void set_decode_hook(std::function<void(const llama_batch &)> hook) { hook_ = std::move(hook); }
    // an owned context: its llama_decode calls run through `run`, which calls its argument and returns
    // when it is done (a step engine's run_on_thread: ggml's OpenMP team belongs to the thread that
    // computes, and a second team beside the engine's outnumbers the cores, so every team's workers sleep
    // between passes); empty = on the caller's thread. Not for a view
    void set_compute(std::function<void(const std::function<void()> &)> run) { compute_ = std::move(run); }
    // a view of a host's context (context_view)
    bool is_view() const { return step_ != nullptr; }
    // a view: the engine's sequence its sequence 0 is (its region or stream); 0 for an owned context
    llama_seq_id view_seq() const { return seq_; }
    // a view: what the other requests put in the host's last step (none for an owned context)
    step_load step_others() const;
    // logits of batch row i (that row must have had logits set): [n_vocab], valid until the next decode;
    // not after a decode that handed back argmax outputs (argmax_only())
    const float * logits(int32_t i) const;
    // the argmax of batch row i's logits (the lowest id of the largest; sampling_argmax's token), from the
    // decode's argmax outputs or from logits(i)
    llama_token argmax(int32_t i) const;
    // the last decode handed back each row's argmax instead of its logits
    bool argmax_only() const { return argmax_last_; }

    // KV operations (see llama.h): positions [p0, p1), p < 0 = unbounded
    bool kv_rm(llama_seq_id seq, llama_pos p0, llama_pos p1);
    void kv_add(llama_seq_id seq, llama_pos p0, llama_pos p1, llama_pos delta);
    void kv_cp(llama_seq_id src, llama_seq_id dst, llama_pos p0, llama_pos p1);
    void kv_keep(llama_seq_id seq);
    void kv_clear();
    llama_pos kv_pos_max(llama_seq_id seq) const; // -1 = empty
    bool can_shift() const;

    // sequence 0's state (KV cells) as llama_state_seq_* reads and writes it: its size, a copy into
    // dst (returns the bytes written, 0 = failure), and a load from src (returns the bytes read, 0 =
    // failure, the sequence is then empty)
    // partial: a recurrent model's recurrent state only (LLAMA_STATE_SEQ_FLAGS_PARTIAL_ONLY), its attention's
    // cells left where they are (a checkpoint: load it, then kv_rm the cells past it)
    size_t state_size(bool partial = false);
    size_t state_get(uint8_t * dst, size_t size, bool partial = false);
    size_t state_set(const uint8_t * src, size_t size, bool partial = false);

    int32_t n_ctx() const;
    int32_t n_batch() const;
    int32_t n_seq_max() const;
    // the most trailing tokens one kv_rm may drop after a decode: unbounded for a KV cache; a recurrent
    // model's snapshots (CONTEXT_RS_ROLLBACK where llama.cpp can roll its architecture back, else 0)
    int32_t rollback_max() const;
    // a recurrent state llama.cpp cannot roll back (Qwen3-Next, Granite 4's hybrid, Falcon-H1, Mamba,
    // RWKV): a pass that may be rejected first saves the state (state_get, partial) and goes back to it,
    // as llama-server's speculative checkpoints do; the pass's accepted tokens are decoded again
    bool checkpoints() const { return rollback_max() == 0; }
    int32_t n_threads() const;
    const context_params & params() const { return params_; }
    const model & owner() const { return model_; }
    llama_context * get() const { return ctx_; }

    // the prompt whose KV sequence 0 holds at positions 0 .. n-1 (context_prefill_cached, in
    // pie.h); every KV operation and decode that touches those cells shortens it
    const token_vec & cached_prompt() const { return cached_; }
    // per cached token: 1 = its KV was computed against another text before it (PIE reuse)
    const std::vector<uint8_t> & cached_stale() const { return stale_; }
    // stale: one mark per token; empty = the marks of the tokens t shares with the cached prompt
    // (a prefix), 0 after them
    void set_cached_prompt(std::span<const llama_token> t, std::span<const uint8_t> stale = {});

private:
    void cache_cut(llama_seq_id seq, llama_pos p0);
    // a view: sequence 0 is the engine's stream seq_; other sequences are a caller's error
    llama_seq_id seq_of(llama_seq_id seq) const;
    // a view's KV operations wait for the engine's step; an owned context needs no lock
    std::unique_lock<std::mutex> lock_kv() const;
    friend std::unique_ptr<context> context_create(const model & m, const context_params & p, std::string * error);
    friend std::unique_ptr<context> context_view(context & shared, view_host & host, llama_seq_id seq, int32_t n_ctx,
                                                 const context_params & per_view);
    explicit context(const model & m) : model_(m) {}

    const model & model_;
    llama_context * ctx_ = nullptr;  // owned unless step_ is set
    int32_t n_vocab_ = 0;
    context_params params_;
    token_vec cached_;
    std::vector<uint8_t> stale_; // cached_.size() marks
    // a recurrent model: each sequence's tokens in the last decode that carried it. Its state goes back
    // only to a snapshot that decode took, while libllama's seq_rm takes any rollback up to n_rs_seq
    // (a snapshot of an older decode then: a wrong state); kv_rm refuses those (0 after a rollback)
    std::vector<int32_t> rs_last_;
    const std::atomic<bool> * cancel_ = nullptr;
    std::function<void(const llama_batch &)> hook_;
    std::function<void(const std::function<void()> &)> compute_;

    view_host * step_ = nullptr;     // a view of this host's context, on its sequence seq_
    llama_seq_id seq_ = 0;
    int32_t n_ctx_view_ = 0;         // the stream's cells
    view_outputs view_out_;          // the last decode's rows
    bool argmax_last_ = false;       // the last decode handed back argmax outputs
};

// null on failure with *error set
std::unique_ptr<context> context_create(const model & m, const context_params & p, std::string * error);

// a view of `shared` (a context host owns) on its sequence seq, whose decodes and KV locking go
// through host: n_ctx cells (the sequence's region or stream), per_view's batch and threads
std::unique_ptr<context> context_view(context & shared, view_host & host, llama_seq_id seq, int32_t n_ctx,
                                      const context_params & per_view);

// one-time process set-up: backend init and log routing
void engine_init();

// layers of every model loaded afterwards that go to the GPU (--gpu-layers): -1 (the default) = all,
// 0 = none; a build without a GPU backend ignores it. Call before the first model_load.
void engine_set_gpu_layers(int32_t n);
int32_t engine_gpu_layers();

// a GPU of this machine (CUDA). llama_supports_gpu_offload() says yes for any build with the RPC
// backend (include/editspec/rpc.h), whose workers are CPUs running our exact kernels.
bool engine_has_gpu();

// names the calling thread (at most 15 characters; as `top -H` and /proc/PID/task/TID/comm show it); the
// threads it starts, ggml's OpenMP workers among them, start with its name
void thread_name_set(const char * name);
// the calling thread's name ("" where the platform has none)
std::string thread_name_get();
// layers can leave this process: a GPU or RPC workers (--rpc)
bool engine_offloads();

// Which kernels a GPU runs (--kernels on every command): exact (the batch-invariant CUDA mode,
// patches/ggml-cuda-batch-invariant.patch: greedy speculative output equals plain decoding on quantized
// weights with every layer on the GPU, docs/gpu.md), stock (llama.cpp's own kernels, CUDA graphs aside:
// fastest, not batch-exact), auto (the default: exact where it is exact, stock where it cannot be: float
// weights, which go through cuBLAS, and a partial offload). Without the flag, EDITSPEC_CUDA_EXACT=0 / 1
// stands for stock / exact. A CPU build's kernels are always the exact ones, whatever is chosen.
// Decided at the first model_load on a GPU (the target's), from its file's weight type and
// --gpu-layers, before any kernel runs; set before it.
enum engine_kernels { ENGINE_KERNELS_AUTO, ENGINE_KERNELS_EXACT, ENGINE_KERNELS_STOCK };
void engine_set_kernels(engine_kernels k);
engine_kernels engine_kernels_chosen();                            // as set (AUTO unless the flag named one)
bool engine_kernels_parse(const std::string & name, engine_kernels & out); // "auto" | "exact" | "stock"
const char * engine_kernels_name(engine_kernels k);
// the kernels in force: a GPU's, once decided (and the setting's guess before); on a CPU build, exact
bool engine_cuda_exact();
bool engine_gpu_exact_attention();

// Argmax outputs (patches/llama-output-argmax.patch): a decode whose caller reads each row's argmax only
// (greedy verification, greedy generation) ends in an argmax over the logits where they are computed and
// hands back one token a row: on a GPU 4 bytes a row cross to the host instead of n_vocab floats. The
// same token as sampling_argmax on the host, on every backend. Off unless EDITSPEC_DEVICE_ARGMAX=1 (on a CPU
// the copy it saves is a memcpy, and ggml's argmax runs on one thread over every row; on a GPU not yet
// measured: scripts/gpu-check.sh's issue73 plan times both); engine_set_argmax_outputs overrides it.
bool engine_argmax_outputs();
void engine_set_argmax_outputs(bool on);

// Where a sequence's passes start again, for measurements that decode many passes from one prefix
// (check-exact, the cost model): a KV cache drops the cells past the prefix; a recurrent state goes back
// only within the decode that made it (context::rollback_max), so its state after the prefix is saved
// here once and loaded before each pass, as llama-server's checkpoints do. An owned context (not a view).
struct seq_restart {
    seq_restart(context & ctx, llama_seq_id seq, llama_pos n_prefix);
    bool restore(); // false: the cache refused (the caller's error)

    context & ctx;
    llama_seq_id seq;
    llama_pos n_prefix;
    std::vector<uint8_t> saved; // a recurrent state's, after a prefix
};

// one throwaway decode, then an empty cache: the model's pages are mapped and the compute
// buffers touched before the first request rather than during it (~0.3 s for a 1.3B file here,
// as llama-server does at start). False if the decode fails. Not for a view.
bool context_warm_up(context & ctx);

// decode tokens [0, n) of `tokens` into sequence `seq` starting at position `pos0`, in chunks of
// the context's n_batch; logits are kept for the last token only. False on decode failure.
bool context_prefill(context & ctx, batch & b, std::span<const llama_token> tokens, llama_pos pos0, llama_seq_id seq);

// ----------------------------------------------------------------------------
// One speculative pass over a token tree (n = tokens of sequence 0 in the KV cache, L = leaves):
//
//   row      token             pos          seq ids
//   0..P-1   pending tokens    n .. n+P-1   {0, 1 .. L}   committed, not yet in the KV cache; the
//                                                         last one (row P-1, position r) is the root
//   P+i      tree node i       r + d(i)     {j : leaf j-1 lies under node i}
//
// Every path root -> leaf j-1 is sequence j, so attention sees exactly that path's ancestors
// (llama.cpp has no custom mask; its examples/lookahead does the same). Sequences that share a token
// must hold the same positions, so sequence 0's cells are first copied into each path's sequence
// (metadata only in a unified cache). A tree with one leaf uses sequence 0 alone.

struct tree_pass {
    llama_pos n_past  = 0; // tokens of sequence 0 in the KV cache
    int32_t n_pending = 0; // P
    int32_t n_nodes   = 0;
    int32_t n_leaves  = 0; // L; sequences 1..L are used when L > 1
    llama_pos root_pos() const { return n_past + n_pending - 1; }
};

// Lays out the batch above (b must hold n_pending + nodes rows and L + 1 sequence ids; the context
// n_seq_max > L). parents[i] is node i's parent (-1 = the root), parents before children.
tree_pass context_tree_batch(context & ctx, batch & b, std::span<const llama_token> pending, llama_pos n_past,
                             std::span<const llama_token> tokens, std::span<const int32_t> parents);

// After the pass: sequence 0 keeps the pending tokens and tree rows 0 .. n_kept-1 (a path that
// occupies the first rows); every path sequence and every other node's cell goes. False when the
// cache refuses a partial removal (recurrent models).
bool context_tree_keep(context & ctx, const tree_pass & tp, int32_t n_kept);

} // namespace editspec
