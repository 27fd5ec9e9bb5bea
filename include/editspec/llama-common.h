// llama.cpp's own speculative drafters (its `common` library, common/speculative.h at the pinned
// commit) behind editspec's drafter interface, so the bench measures editspec's methods against
// llama.cpp's real code in the same run, not against a re-reading of it.
//
//     method name          llama.cpp type (llama-server --spec-type)   defaults
//     llama-ngram-simple   ngram-simple                                 n = 12, m = 48
//     llama-ngram-map-k    ngram-map-k                                  n = 12, m = 48, min hits 1
//     llama-ngram-mod      ngram-mod                                    n_match 24, m 48 .. 64
//     llama-ngram-cache    ngram-cache (context cache; with datastores, a static cache of their
//                          token pairs, as llama-lookup-create makes from the same corpus and
//                          llama-server reads with --lookup-cache-static)
//
// Each proposes one chain per pass, as llama-server does, into the shared draft tree under
// DRAFT_SOURCE_LOOKUP; what the target accepted goes back through common_speculative_accept.
// Only available when editspec was built against a llama.cpp with its common library
// (scripts/setup-llama.sh installs it); llama_common_available() says so.
#pragma once

#include "editspec/datastore.h"
#include "editspec/draft.h"

#include <memory>
#include <string>
#include <vector>

namespace editspec {

// "llama-ngram-simple", ... (named even when this build lacks llama.cpp's common library: making
// one then fails with an error that says so)
bool llama_common_available();

// null with *error when `name` is not one of the llama-ngram-* rows (drafters.h); corpus: llama-ngram-cache's
// static cache is built from these datastores' tokens (once per set, for the process's life)
std::unique_ptr<drafter_i> llama_common_drafter_create(const std::string & name, std::string * error,
                                                       std::span<const datastore * const> corpus = {});

} // namespace editspec
