// Wall-clock timing of a step, in milliseconds: the one timing helper of the engine, the drafters and
// the commands.
#pragma once

#include <chrono>

namespace editspec {

using clock_type = std::chrono::steady_clock;

// milliseconds from t0 to now
inline double ms_since(clock_type::time_point t0) {
    return std::chrono::duration<double, std::milli>(clock_type::now() - t0).count();
}

} // namespace editspec
