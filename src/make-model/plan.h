// make-model's plan of a model (src/make-model): every tensor's name, shape, type and init, in file
// order (shapes.cpp), which the writer (make-model.cpp) fills with random values.
#pragma once

#include "editspec/make-model.h"

#include "ggml.h"

#include <cstdint>
#include <string>
#include <vector>

namespace editspec {

enum init_kind { INIT_CONST, INIT_NORMAL };

struct tensor_plan {
    std::string name;
    int64_t   ne0;      // elements per row (the input dimension of a matrix)
    int64_t   ne1;      // rows, 1 for vectors (of each of ne2 matrices)
    int       n_dims;   // 1, 2, or 3 (a matrix per expert)
    ggml_type type;
    init_kind init;
    float     scale;    // INIT_NORMAL: std; INIT_CONST: the value
    int64_t   ne2 = 1;  // matrices (n_dims 3)
};

// every row of t, its matrices one after the other
inline int64_t tensor_rows(const tensor_plan & t) { return t.ne1 * t.ne2; }

// a head's width: head_dim, or n_embd / n_head where the shape does not give one
uint32_t model_shape_head_dim(const model_shape & s);

// the tensors of shape s with a vocabulary of n_vocab, matrices of `type` (1-D tensors F32; a row
// size the block size does not divide F16, as llama-quantize does)
std::vector<tensor_plan> tensors_plan(const model_shape & s, int64_t n_vocab, ggml_type type);
// the bytes of t's data (unpadded)
uint64_t tensor_nbytes(const tensor_plan & t);

} // namespace editspec
