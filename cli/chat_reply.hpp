// Where a chat reply ends: a model without a chat template writes the next turn's marker ("\nUser:")
// piece by piece, and what it wrote of it belongs to no one's turn. Header-only: tests/test_options.cpp
// checks it directly.
#pragma once
#include <algorithm>
#include <cstddef>
#include <string>
#include <string_view>

namespace glassbox::cli {

// What a streamed reply may show so far: its length up to the marker when the marker is whole (found
// = true: the reply ends there), else up to the longest tail that could still become the marker.
struct ReplyCut {
  std::size_t show = 0;
  bool found = false;
};
inline ReplyCut cut_reply(std::string_view reply, std::string_view marker) {
  if (const auto at = reply.find(marker); at != std::string_view::npos) return {at, true};
  std::size_t hold = std::min(reply.size(), marker.size() - 1);
  while (hold > 0 && reply.substr(reply.size() - hold) != marker.substr(0, hold)) --hold;
  return {reply.size() - hold, false};
}

// The reply as the history keeps it once the run has ended: without a marker begun but not finished
// (a reply cut by --max-tokens after "\nUs"), and without the spaces and newlines around it.
inline std::string finished_reply(std::string_view reply, std::string_view marker) {
  std::string r(reply.substr(0, marker.empty() ? reply.size() : cut_reply(reply, marker).show));
  const auto b = r.find_first_not_of(" \n");
  if (b == std::string::npos) return {};
  return r.substr(b, r.find_last_not_of(" \n") - b + 1);
}

}  // namespace glassbox::cli
