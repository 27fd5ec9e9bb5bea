// libFuzzer target: /v1/sessions request bodies through their parsers (src/server/sessions-parse.cpp).
// An exception escaping a parser is a crash. The first byte picks the parser (create, edits,
// complete); the rest is the body. Run: scripts/fuzz.sh 1000000 fuzz-sessions
#include "server-sessions.h"

#include "fuzz-guard.h"

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

static void check(const uint8_t * data, size_t size) {
    if (size == 0) return;
    const std::string body((const char *) data + 1, size - 1);
    editspec::api_error err;
    bool ok = false;
    switch (data[0] % 3) {
        case 0: {
            editspec::session_create_request rq;
            ok = editspec::session_parse_create(body, editspec::session_store_params(), rq, err);
            if (ok && rq.params.drift_max < -1) abort();
            break;
        }
        case 1: {
            std::vector<editspec::text_edit> edits;
            ok = editspec::session_parse_edits(body, edits, err);
            if (ok && (edits.empty() || edits.size() > editspec::API_EDITS_MAX)) abort();
            break;
        }
        default: {
            int32_t n = 0;
            ok = editspec::session_parse_complete(body, n, err);
            if (ok && (n < 1 || n > editspec::SESSION_COMPLETE_MAX)) abort();
            break;
        }
    }
    if (!ok) {
        if (err.status < 400 || err.status > 499 || err.message.empty()) abort();
        (void) editspec::api_error_json(err).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    }
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t * data, size_t size) {
    return fuzz_guard("fuzz-sessions", [&] { check(data, size); });
}
