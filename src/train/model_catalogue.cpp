#include "train/model_catalogue.hpp"

#include <algorithm>
#include <memory>
#include <mutex>
#include <utility>

#include "core/names.hpp"
#include "kernels/error.hpp"

namespace noeira {

namespace {

bool name_character(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
         c == '_' || c == '.';
}

void check_entry(const ModelEntry& e, const std::vector<ModelEntry>& before) {
  // The name is a flag's value, a directory's part (runs/<model>-...) and a file's attribute.
  if (e.name.empty() || e.name.size() > 64 ||
      !std::ranges::all_of(e.name, [](char c) { return name_character(c); })) {
    throw InputError(detail::concat("model catalogue: the name '", e.name,
                                    "' is not 1 to 64 letters, digits, '-', '_' or '.'"));
  }
  for (const ModelEntry& other : before) {
    if (other.name == e.name) {
      throw InputError(detail::concat("model catalogue: two models are named '", e.name, "'"));
    }
  }
  if (e.train == nullptr || e.eval == nullptr || e.export_safetensors == nullptr) {
    throw InputError(detail::concat("model catalogue: model '", e.name,
                                    "' was not made by model_entry<M> (a body is missing)"));
  }
  for (const FlagValue& d : e.defaults) {
    if (!d.flag.starts_with("--") || d.flag == "--model") {
      throw InputError(detail::concat("model catalogue: model '", e.name, "' defaults '", d.flag,
                                      "', which is not a flag it may set"));
    }
  }
}

std::mutex catalogue_mutex;
std::unique_ptr<const ModelCatalogue>& installed() {
  static std::unique_ptr<const ModelCatalogue> catalogue;
  return catalogue;
}

}  // namespace

ModelCatalogue::ModelCatalogue(std::vector<ModelEntry> entries) {
  if (entries.empty()) throw InputError("model catalogue: no model in it");
  for (ModelEntry& e : entries) {
    check_entry(e, entries_);
    entries_.push_back(std::move(e));
  }
}

const ModelEntry* ModelCatalogue::find_if(std::string_view name) const {
  for (const ModelEntry& e : entries_) {
    if (e.name == name) return &e;
  }
  return nullptr;
}

const ModelEntry& ModelCatalogue::find(std::string_view name) const {
  if (const ModelEntry* e = find_if(name)) return *e;
  throw_unknown_name("model", name, names());
}

std::string ModelCatalogue::names() const {
  std::string out;
  for (const ModelEntry& e : entries_) out += (out.empty() ? "" : ", ") + e.name;
  return out;
}

const ModelCatalogue& model_catalogue() {
  const std::lock_guard lock(catalogue_mutex);
  std::unique_ptr<const ModelCatalogue>& c = installed();
  if (!c) c = std::make_unique<const ModelCatalogue>(preset_catalogue());
  return *c;
}

void install_model_catalogue(ModelCatalogue catalogue) {
  const std::lock_guard lock(catalogue_mutex);
  installed() = std::make_unique<const ModelCatalogue>(std::move(catalogue));
}

}  // namespace noeira
