// How far above 1 the probabilities one step lists may sum (`trace validate` and `trace import` check it).
#pragma once

namespace glassbox::traces {

// A step's listed probabilities (step.top, plus step.unlisted; an imported top list) sum to at most
// 1 + this. The rounding of the engines that write them (float32 softmax, logprobs printed to 6+ digits,
// llama.cpp's u16-quantized KL rows at ±1.3e-4 each) stays far below it; a list that sums to more is not
// one distribution (docs/reliability.md).
inline constexpr double kProbabilityMassTolerance = 1e-3;

}  // namespace glassbox::traces
