// libFuzzer target: request bodies of every endpoint through api_parse (src/server/api-parse.cpp) and
// the apply message format (src/request/apply.cpp). An exception escaping a parser is a crash.
// The first byte picks the endpoint; the rest is the body. Built with ASan and UBSan by
// -DEDITSPEC_FUZZ=ON (clang); run: scripts/fuzz.sh 1000000 fuzz-api
#include "editspec/server.h"

#include "fuzz-guard.h"

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

static void check(const uint8_t * data, size_t size) {
    if (size == 0) return;
    const auto ep = (editspec::api_endpoint) (data[0] % editspec::API_ENDPOINT_COUNT);
    const std::string body((const char *) data + 1, size - 1);
    editspec::api_request rq;
    editspec::api_error err;
    if (!editspec::api_parse(ep, body, rq, err)) {
        // every refusal is a 4xx with a message, and renders as JSON
        if (err.status < 400 || err.status > 499 || err.message.empty()) abort();
        (void) editspec::api_error_json(err).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
        return;
    }
    if (rq.n_predict < -1 || rq.sampling.temp < 0.0f || rq.sampling.top_p <= 0.0f) abort();
    if (rq.messages.size() > editspec::API_MESSAGES_MAX || rq.stop.size() > editspec::API_STOP_MAX ||
        rq.prediction.size() > editspec::API_PREDICTION_BYTES_MAX) {
        abort();
    }
    for (llama_token t : rq.prompt_tokens) {
        if (t < 0) abort(); // ids are range-checked, never wrapped
    }
    // an apply's prediction is its code; a message in the apply format round-trips
    if (rq.is_apply && (!rq.has_prediction || ((ep == editspec::API_APPLY || ep == editspec::API_CODE_APPLY) && rq.prediction != rq.apply.code))) abort();
    editspec::apply_input back;
    if (rq.is_apply && !editspec::apply_message_parse(editspec::apply_message(rq.apply), back)) abort();
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t * data, size_t size) {
    return fuzz_guard("fuzz-api", [&] { check(data, size); });
}
