#include "linear/converted_module.h"

#include <ATen/ATen.h>
#include <c10/util/Exception.h>

#include <functional>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "linear/int8_linear.h"
#include "linear/packed_weight.h"
#include "linear/weight_form.h"

namespace mha {
namespace detail {

namespace {

/// Whether `module` or a module under it has a child of type `Form`.
template <typename Form>
bool holds(const torch::nn::Module& module) {
  for (const auto& child : module.named_children()) {
    if (std::dynamic_pointer_cast<Form>(child.value()) || holds<Form>(*child.value())) return true;
  }
  return false;
}

bool is_form(const std::shared_ptr<torch::nn::Module>& module) {
  return std::dynamic_pointer_cast<WeightForm>(module) != nullptr;
}

/// The form's child name archived for `param` in `archive` (read into
/// `form_archive`), or "" when the archive holds `param` in float.
std::string archived_form(torch::serialize::InputArchive& archive,
                          const std::string& param,
                          torch::serialize::InputArchive& form_archive) {
  for (const char* suffix : {"_int8", "_packed"}) {
    if (archive.try_read(param + suffix, form_archive)) return param + suffix;
  }
  return "";
}

/// `load_checking_converted`'s check of `m`'s own parameters against `a`.
void check_parameters(const torch::nn::Module& m,
                      torch::serialize::InputArchive& a,
                      const std::string& prefix) {
  for (const auto& param : m.named_parameters(/*recurse=*/false)) {
    torch::serialize::InputArchive form_archive;
    const std::string archived = archived_form(a, param.key(), form_archive);
    const auto own = weight_form(m, param.key());  // whatever the parameter holds
    const std::string name = prefix + param.key();
    TORCH_CHECK(!archived.empty() || own == nullptr,
                "torch::load: the archive holds float weights for ", name,
                ", but this module's are ", own ? own->kind() : "",
                "; load the archive into a module that is not converted, then convert it");
    if (archived.empty()) continue;
    const std::string archived_kind = archived == param.key() + "_int8"
                                          ? "int8 (mha::quantize_dynamic)"
                                          : "prepacked (mha::prepack)";
    TORCH_CHECK(own != nullptr && archived_kind == own->kind(), "torch::load: the archive holds ",
                name, " as ", archived_kind, " weights, but this module's are ",
                own ? own->kind() : "float", "; convert this module the same way first, then load");
    own->check_archived(form_archive, name);
  }
}

}  // namespace

bool holds_int8(const torch::nn::Module& module) { return holds<Int8WeightImpl>(module); }

bool holds_prepacked(const torch::nn::Module& module) { return holds<PackedWeightImpl>(module); }

void copy_with_converted_weights(const torch::nn::Module& original, torch::nn::Module& copy) {
  std::map<std::string, std::shared_ptr<torch::nn::Module>> copies;
  for (const auto& m : copy.named_modules("", /*include_self=*/true)) copies[m.key()] = m.value();
  torch::NoGradGuard no_grad;
  for (const auto& m : original.named_modules("", /*include_self=*/true)) {
    const auto found = copies.find(m.key());
    if (found == copies.end()) continue;  // under a converted child: nothing of its own
    torch::nn::Module& target = *found->second;
    for (const auto& child : m.value()->named_children()) {
      if (!is_form(child.value()) || target.named_children().contains(child.key())) continue;
      const std::string param = converted_param(child.key()).value();
      target.named_parameters(/*recurse=*/false)[param].set_data(at::empty({0}, at::kFloat));
      target.register_module(child.key(), child.value()->clone());
      for (auto& p : target.parameters(/*recurse=*/false)) p.set_requires_grad(false);
    }
  }
  torch::serialize::OutputArchive saved;
  original.save(saved);
  std::stringstream bytes;
  saved.save_to(bytes);
  torch::serialize::InputArchive loaded;
  loaded.load_from(bytes);
  copy.load(loaded);
}

void load_checking_converted(torch::nn::Module& module, torch::serialize::InputArchive& archive) {
  std::function<void(const torch::nn::Module&, torch::serialize::InputArchive&, const std::string&)>
      check = [&check](const torch::nn::Module& m, torch::serialize::InputArchive& a,
                       const std::string& prefix) {
        check_parameters(m, a, prefix);
        for (const auto& child : m.named_children()) {
          torch::serialize::InputArchive child_archive;
          if (!is_form(child.value()) && a.try_read(child.key(), child_archive)) {
            check(*child.value(), child_archive, prefix + child.key() + ".");
          }
        }
      };
  check(module, archive, "");
  module.torch::nn::Module::load(archive);
}

}  // namespace detail
}  // namespace mha
