// make-model: GGUF models with random weights, real hyperparameters and a real tokenizer.
//
//     editspec::make_model_params p;
//     p.shape = "deepseek-coder-1.3b";               // see model_shapes(), or `editspec make-model --list`
//     p.out   = "models/deepseek-coder-1.3b-q8_0.gguf";
//     p.type  = GGML_TYPE_Q8_0;
//     std::string err;
//     if (!editspec::make_model(p, &err)) { fprintf(stderr, "%s\n", err.c_str()); return 1; }
//
// A shape copies the numbers of a released model (HF config.json) and names one of llama.cpp's
// vocabulary files (ggml-vocab-<vocab>.gguf); the tokenizer.* keys are copied from that file, every
// <arch>.* hyperparameter is written from the shape. The file loads in stock llama.cpp, so speed
// measured on it is the speed of the real model (same tensor shapes and types); only the outputs
// are meaningless. A pipeline that trains its own small models can start from
// make_model_from_shape() with a shape of its own.
//
// Weights (deterministic for a seed, whatever the thread count or --type; a Q8_0 file holds the
// quantized weights of the F32 file with the same seed):
//   token_embd     N(0, 0.02) (HF initializer_range)
//   matrices       N(0, 1/fan_in) (LeCun; 0.022 at n_embd 2048, HF's 0.02 at real sizes), so small
//                  shapes behave like big ones; attn_output at 0.3x that, so the near-uniform
//                  attention of random weights does not drown the current token
//   output_norm    logits with std 5 (top-1 probability ~0.4 on DeepSeek's vocabulary); other
//                  norms 1.0; biases N(0, 0.02)
// Greedy output then moves with the prompt and does not settle into a loop (measured on 2- to
// 24-layer shapes, tied and untied). "N" is the sum of four uniforms (Irwin-Hall), a normal cut at
// +-3.46 std: cheap enough to write a 7 GB model in minutes on two cores.
//
// Memory stays bounded (~64 MB of buffers whatever the model size): tensors are generated and
// written in slabs. The file is written to a temporary name in the output's folder and renamed at
// the end; on failure or abort nothing is left behind.
//
// Threading: the functions are reentrant; on_progress is called from the calling thread.
#pragma once

#include "ggml.h"
#include "llama.h"

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace editspec {

// one entry of the tokenizer, set after the vocabulary file is read (e.g. tokens a newer release
// of the same tokenizer added in the file's padding)
struct model_shape_token {
    int32_t     id;
    std::string text;
    int32_t     type; // llama_token_type: LLAMA_TOKEN_TYPE_CONTROL, ..._USER_DEFINED, ...
};

struct model_shape {
    std::string name;        // "deepseek-coder-1.3b"
    std::string arch;        // general.architecture: "llama", "qwen2", "qwen3moe" (a mixture of experts),
                             // "qwen35" (recurrent layers among attention ones), "qwen3next" (those and
                             // experts with a shared one), "mamba2" (recurrent layers alone), "mimo2" (multi-token
                             // prediction), or a head file's "eagle3" or "dflash"
    std::string vocab;       // tokenizer: <vocab dir>/ggml-vocab-<vocab>.gguf, e.g. "deepseek-coder"
    std::string source;      // where the numbers come from (HF repo), for --list; may be empty

    uint32_t n_vocab     = 0;     // rows of token_embd; 0 = the tokenizer's token count; more = pad
                                  // the tokenizer with "[PAD<id>]" tokens, as converted HF models do
    uint32_t n_layer     = 0;     // the trunk's blocks
    uint32_t n_nextn     = 0;     // mimo2: multi-token-prediction blocks after the trunk (block_count
                                  // counts both; llama.cpp's draft-mtp drafts with them)
    uint32_t n_embd      = 0;
    uint32_t n_ff        = 0;
    uint32_t n_head      = 0;     // head size = n_embd / n_head (= rope dimension) unless head_dim says
    uint32_t head_dim    = 0;     // 0 = n_embd / n_head; Qwen3's heads are wider (attention.key_length)
    uint32_t n_head_kv   = 0;     // < n_head: grouped-query attention
    uint32_t n_ctx_train = 0;     // tokens

    float rope_freq_base = 10000.0f;
    llama_rope_scaling_type rope_scaling = LLAMA_ROPE_SCALING_TYPE_NONE; // NONE or LINEAR
    float rope_scaling_factor = 1.0f; // LINEAR: positions divided by this
    float rms_eps = 1e-5f;

    bool qkv_bias    = false;     // attn_q/k/v.bias (Qwen2)
    bool qk_norm     = false;     // attn_q_norm/attn_k_norm: an RMS norm of each head before rope (Qwen3)

    // qwen3moe: every layer's feed-forward is n_expert experts of n_ff_exp, n_expert_used of them a token
    // (ffn_gate_inp routes; ffn_{gate,up,down}_exps hold the experts); n_ff is then only metadata
    uint32_t n_expert      = 0;
    uint32_t n_expert_used = 0;
    uint32_t n_ff_exp      = 0;
    uint32_t n_ff_shexp    = 0;   // qwen3next: a shared expert of this width beside them, its output gated

    // qwen35 (Qwen3.5's hybrid), qwen3next: every full_attn_interval-th layer attention (a gated Q, per-head Q/K
    // norms, rope on a quarter of each head), the others a gated delta net, a recurrent state of
    // ssm_v_heads heads of ssm_state x ssm_state and a causal convolution of ssm_conv taps over
    // ssm_k_heads key heads, as many query heads and ssm_v_heads value heads of ssm_state each
    uint32_t full_attn_interval = 0;
    uint32_t ssm_conv    = 0;
    uint32_t ssm_state   = 0;
    uint32_t ssm_k_heads = 0;
    uint32_t ssm_v_heads = 0;
    // mamba2 (Mamba-2: Codestral Mamba; Granite 4's and Nemotron-H's recurrent layers): every layer an SSM of
    // ssm_v_heads heads over ssm_inner channels, ssm_k_heads groups of B and C of ssm_state each, a causal
    // convolution of ssm_conv taps; no attention, no feed-forward
    uint32_t ssm_inner   = 0;
    bool tied_output = false;     // no output.weight: the output layer reuses token_embd

    // a speculative head file over a target (arch "eagle3" or "dflash"; llama.cpp's draft-eagle3,
    // draft-dflash, draft-dspark): one or more decoder blocks that read the target's layers below
    std::vector<int32_t> target_layers; // the target layers whose inputs it reads (eagle3: exactly 3)
    uint32_t target_hidden = 0;   // eagle3: the target's n_embd (dflash: its own n_embd must equal it)
    uint32_t block_size    = 0;   // dflash: tokens a block drafts, 0 = llama.cpp's 16 (DSpark needs it)
    uint32_t markov_rank   = 0;   // > 0: DSpark, DFlash with a Markov head of this rank
    int32_t  mask_token    = -1;  // dflash: tokenizer.ggml.mask_token_id (a padding row of the vocabulary)

    int32_t add_bos = -1;         // tokenizer.ggml.add_bos_token: -1 = as in the vocabulary file
    std::vector<model_shape_token> tokens; // set after padding
};

// a shape's sizes, set or compared at once (a released config.json's numbers)
struct model_dims {
    uint32_t n_vocab, n_layer, n_embd, n_ff, n_head, n_head_kv, n_ctx_train;
    bool operator==(const model_dims &) const = default;
};

model_dims model_shape_dims(const model_shape & shape);
void model_shape_set_dims(model_shape & shape, const model_dims & d);

// built-in shapes: tiny, tiny-256, tiny-qwen2, tiny-mimo2, tiny-qwen3moe, tiny-qwen35, tiny-qwen3next, tiny-mamba2,
// deepseek-coder-1.3b, deepseek-coder-6.7b, qwen2.5-coder-1.5b, mimo-7b, qwen3-coder-30b-a3b, qwen3-coder-next; head files for tiny-256: tiny-256-eagle3, tiny-256-dflash, tiny-256-dspark
const std::vector<model_shape> & model_shapes();

// nullptr when no built-in shape has that name
const model_shape * model_shape_find(const std::string & name);

// false with *error naming the field and the value when the shape cannot make a model
bool model_shape_validate(const model_shape & shape, std::string * error);

// parameters, embeddings included (token_embd counted once when tied); n_vocab 0 counts as 0
uint64_t model_shape_n_params(const model_shape & shape);

// bytes of tensor data in a file of this type (1-D tensors stay F32), without the metadata
uint64_t model_shape_n_bytes(const model_shape & shape, ggml_type type);

struct make_model_params {
    std::string shape;              // built-in shape name (make_model only)
    std::string out;                // output file; replaced if it exists
    std::string vocab_dir;          // folder of ggml-vocab-*.gguf; empty = EDITSPEC_VOCAB_DIR of the build
    ggml_type   type      = GGML_TYPE_F16; // matrices: F32, F16, Q8_0 or Q4_0; 1-D tensors are F32
                                           // F16 by default: exact enough for any test and half of F32;
                                           // Q8_0 is what benchmarks on CPU want
    int32_t     ftype     = -1;     // a llama_ftype (see make_model_ftype_from_name): write F16, then
                                    // quantize with libllama's llama_model_quantize, as llama-quantize
                                    // does (K-quant mixes such as Q4_K_M); -1 = use `type` directly
    uint64_t    seed      = 1;
    int32_t     n_threads = 0;      // 0 = all cores; the bytes do not depend on it
    bool        header_only = false; // testing: metadata only, tensor data left as zeros (a sparse file
                                     // where the file system allows): loads in llama.cpp, all weights 0

    // fraction done in [0, 1], called from the calling thread; return false to abort
    std::function<bool(float)> on_progress;
};

// writes the built-in shape p.shape; false with *error (one line naming the value or file)
bool make_model(const make_model_params & p, std::string * error);

// writes `shape` (p.shape is ignored)
bool make_model_from_shape(const model_shape & shape, const make_model_params & p, std::string * error);

// "f32", "f16", "q8_0", "q4_0" -> type; GGML_TYPE_COUNT when not one of those
ggml_type make_model_type_from_name(const std::string & name);

// the types llama-quantize makes from an F16 file: "q4_k_m", "q4_k_s", "q5_k_m", "q5_k_s", "q6_k",
// "q5_0", "iq4_nl", "bf16" -> a llama_ftype; -1 when not one of those
int32_t make_model_ftype_from_name(const std::string & name);

// every name --type takes, for messages: "f32, f16, q8_0, q4_0, q4_k_m, ..."
std::string make_model_type_names();

} // namespace editspec
