// Opening a model file: the format is told by its first bytes, never by its name.
#include "glassbox/model/model_source.hpp"

#include <map>

#include "glassbox/error.hpp"
#include "glassbox/model/gguf.hpp"
#include "glassbox/quant.hpp"

namespace glassbox {

namespace {
// Every quantized (and F16/BF16) tensor's block scales must be finite: a NaN or infinite d would
// otherwise become finite garbage once the integer dots are scaled (F32 values are checked where the
// weights are taken, by kernels::first_nonfinite). Scales only — two bytes per block — so it costs
// little on every load.
void check_block_scales(const GgufFile& g, const std::string& path) {
  for (const auto& info : g.tensors()) {
    if (info.dtype == DType::F32) continue;
    const Tensor t = g.tensor(info);
    const std::size_t count = t.bytes / dtype_info(t.dtype).block_bytes;
    const char* field = "";
    if (const std::size_t i = quant::first_nonfinite_scale(t.dtype, t.data, count, &field); i < count) {
      const bool value = t.dtype == DType::F16 || t.dtype == DType::BF16;
      throw ModelError(path + ": tensor '" + t.name + "' (" + std::string(dtype_name(t.dtype)) + ") " +
                       (value ? "value #" + std::to_string(i) : "block #" + std::to_string(i) + " scale " + field) +
                       " is not a finite number (expected finite " + (value ? "weights" : "block scales") + ")");
    }
  }
}
}  // namespace

std::unique_ptr<ModelSource> ModelSource::open(const std::filesystem::path& path) {
  return open(std::make_shared<const MappedFile>(path));
}

std::unique_ptr<ModelSource> ModelSource::open(std::shared_ptr<const MappedFile> file) {
  std::unique_ptr<ModelSource> s(new ModelSource());
  s->path_ = file->path();
  s->file_ = std::move(file);
  if (is_gguf(s->file_->data(), s->file_->size())) {
    s->open_gguf();
    check_block_scales(*s->gguf_, s->path_.string());
  } else
    s->open_llama2c();  // llama2.c has no magic of its own (legacy) or "ak42": its header check decides
  return s;
}

std::string Weights::type_summary() const {
  std::map<std::string_view, int> count;
  for_each([&](const Tensor& t) { ++count[dtype_name(t.dtype)]; });
  std::string out;
  for (const auto& [name, n] : count) out += (out.empty() ? "" : ", ") + std::string(name) + ":" + std::to_string(n);
  return out;
}

std::int64_t Weights::parameter_count() const {
  std::int64_t n = 0;
  for_each([&](const Tensor& t) { n += t.numel(); });
  return n;
}

}  // namespace glassbox
