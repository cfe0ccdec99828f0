#include <ATen/core/ATenOpList.h>

#include <cstring>
#include <string>
#include <unordered_set>
#include <utility>
#include <ATen/core/operator_name.h>

// ${generated_comment}

namespace at {

namespace {
using NamePair = std::pair<const char*, const char*>;

struct NamePairEq final {
  bool operator()(const NamePair& a, const NamePair& b) const {
    return std::strcmp(a.first, b.first) == 0 && std::strcmp(a.second, b.second) == 0;
  }
};

struct NamePairHash final {
  size_t operator()(const NamePair& p) const {
    // hash the characters, not the pointers
    const std::hash<std::string> h;
    return h(p.first) ^ (~h(p.second));
  }
};
} // namespace

// True for any operator that is not one of ATen's own (name, overload) pairs.
bool is_custom_op(const c10::OperatorName& opName) {
  static const std::unordered_set<NamePair, NamePairHash, NamePairEq> aten_ops {
    ${aten_ops}
    {"", ""}
  };
  return aten_ops.count({opName.name.c_str(), opName.overload_name.c_str()}) == 0;
}
} // namespace at
