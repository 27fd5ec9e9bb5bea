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
    int64_t   ne1;      // rows, 1 for vectors
    int       n_dims;
    ggml_type type;
    init_kind init;
    float     scale;    // INIT_NORMAL: std; INIT_CONST: the value
};

// the tensors of shape s with a vocabulary of n_vocab, matrices of `type` (1-D tensors F32; a row
// size the block size does not divide F16, as llama-quantize does)
std::vector<tensor_plan> tensors_plan(const model_shape & s, int64_t n_vocab, ggml_type type);
// the bytes of t's data (unpadded)
uint64_t tensor_nbytes(const tensor_plan & t);

} // namespace editspec
