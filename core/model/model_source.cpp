// Opening a model file: the format is told by its first bytes, never by its name.
#include "glassbox/model/model_source.hpp"

#include <map>

#include "glassbox/error.hpp"

namespace glassbox {

std::unique_ptr<ModelSource> ModelSource::open(const std::filesystem::path& path) {
  return open(std::make_shared<const MappedFile>(path));
}

std::unique_ptr<ModelSource> ModelSource::open(std::shared_ptr<const MappedFile> file) {
  std::unique_ptr<ModelSource> s(new ModelSource());
  s->path_ = file->path();
  s->file_ = std::move(file);
  if (is_gguf(s->file_->data(), s->file_->size()))
    s->open_gguf();
  else
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
