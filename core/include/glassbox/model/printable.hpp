// File-sourced texts in messages: what a model file names (keys, architecture and tensor names, string values)
// is shown escaped, since it may hold any bytes.
#pragma once
#include <cstddef>
#include <string>
#include <string_view>

namespace glassbox {

// `s` as a message may show it: control bytes (NUL, BEL, ESC, DEL) as \xNN escapes, cut after `max_len` bytes
// with "...". Raw, a NUL would cut the message and ESC would reach the terminal. (core/model/metadata.cpp)
std::string printable_text(std::string_view s, std::size_t max_len = 80);

}  // namespace glassbox
