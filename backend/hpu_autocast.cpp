// Autocast for the hpu (the AutocastHPU dispatch key), driven by op lists.
//
// One generic boxed kernel serves every listed op: it is registered, per op
// overload, with that overload's policy as data (lower precision, fp32,
// promote), casts the floating hpu arguments accordingly and calls the op
// again below the autocast key. Ops in no list fall through at no cost.
// The lists are plain text (hmp/*.txt, or the files the user names), read
// by the C core (hpu_oplist_*); this file checks the names against the
// dispatcher and (re)registers the kernels. Python (habana_torch.hpex.hmp)
// decides which files to load and when.
//
// Two policy tables: one for torch.autocast("hpu") and one for HMP
// (hmp.convert), chosen per thread. Casts of fp32 leaf weights are cached
// within a torch.autocast region by PyTorch's own at::autocast::cached_cast
// (the cache is cleared when the outermost region exits); HMP has no region,
// so it does not cache (an optimizer step would make a cached copy stale).
#include <ATen/autocast_mode.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <c10/core/impl/LocalDispatchKeySet.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>
#include <torch/csrc/Exceptions.h>
#include <torch/library.h>

#include <atomic>
#include <cstdio>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "hpu_common.h"

extern "C" {
#include "hpu/oplist.h"
}

namespace py = pybind11;

namespace habana_torch {
namespace {

enum Policy : int { kNone = 0, kLower = 1, kFp32 = 2, kPromote = 3, kLowerFp32Out = 4 };
enum Table : int { kAutocastTable = 0, kHmpTable = 1 };

const char* policy_name(int p) {
  switch (p) {
    case kLower: return "lower_precision";
    case kFp32: return "fp32";
    case kPromote: return "promote";
    case kLowerFp32Out: return "lower_precision_fp32_out";
  }
  return "none";
}

// Per thread: whether hmp.convert() switched HMP on in this thread.
thread_local bool t_hmp = false;
std::atomic<bool> g_verbose{false};

bool eligible(const at::Tensor& t) {
  return t.defined() && t.is_hpu() && t.is_floating_point() && t.scalar_type() != at::kDouble;
}

class AutocastKernel final : public c10::OperatorKernel {
 public:
  AutocastKernel(int autocast_policy, int hmp_policy) : policy_{autocast_policy, hmp_policy} {}

  void operator()(const c10::OperatorHandle& op, c10::DispatchKeySet ks, torch::jit::Stack* stack) {
    const bool hmp = t_hmp;
    const int policy = policy_[hmp ? kHmpTable : kAutocastTable];
    if (policy == kNone) {
      // Listed only in the other table: behave as a fallthrough (the ops it
      // calls inside still see autocast).
      op.redispatchBoxed(ks & c10::DispatchKeySet(c10::DispatchKeySet::FULL_AFTER, c10::DispatchKey::AutocastHPU),
                         stack);
      return;
    }
    cast_arguments(op, policy, hmp, stack);
    {
      c10::impl::ExcludeDispatchKeyGuard no_autocast(c10::DispatchKey::AutocastHPU);
      op.callBoxed(stack);
    }
    if (policy == kLowerFp32Out) {
      // HMP O2: only the op itself runs in bf16; its results go on in fp32.
      size_t nret = op.schema().returns().size();
      for (size_t i = stack->size() - nret; i < stack->size(); i++) {
        c10::IValue& v = (*stack)[i];
        if (v.isTensor() && eligible(v.toTensor()) && v.toTensor().scalar_type() != at::kFloat)
          v = cast(op, "result", v.toTensor(), at::kFloat, /*cache=*/false, hmp);
      }
    }
  }

 private:
  static at::Tensor cast(const c10::OperatorHandle& op, const std::string& arg, const at::Tensor& t,
                         at::ScalarType to, bool cache, bool hmp) {
    if (!eligible(t) || t.scalar_type() == to) return t;
    if (g_verbose.load(std::memory_order_relaxed)) {
      std::fprintf(stdout, "[%s] %s: %s %s -> %s\n", hmp ? "hmp" : "autocast",
                   c10::toString(op.schema().operator_name()).c_str(), arg.c_str(),
                   c10::toString(t.scalar_type()), c10::toString(to));
      std::fflush(stdout);
    }
    return cache ? at::autocast::cached_cast(to, t, c10::DeviceType::HPU) : t.to(to);
  }

  static void cast_arguments(const c10::OperatorHandle& op, int policy, bool hmp, torch::jit::Stack* stack) {
    const auto& args = op.schema().arguments();
    const size_t base = stack->size() - args.size();
    const at::ScalarType lower = hmp ? at::kBFloat16 : at::autocast::get_autocast_dtype(at::kHPU);
    at::ScalarType to = lower;
    if (policy == kFp32) {
      to = at::kFloat;
    } else if (policy == kPromote) {
      // The widest floating type among the hpu arguments (as at::autocast::
      // promote_type): anything but the lower precision type means fp32.
      auto visit = [&](const at::Tensor& t) {
        if (eligible(t) && t.scalar_type() != lower) to = at::kFloat;
      };
      for (size_t i = base; i < stack->size(); i++) {
        const c10::IValue& v = (*stack)[i];
        if (v.isTensor()) {
          visit(v.toTensor());
        } else if (v.isTensorList()) {
          for (const at::Tensor& t : v.toTensorVector()) visit(t);
        } else if (v.isOptionalTensorList()) {
          for (const auto& ref : v.toOptionalTensorList()) {
            std::optional<at::Tensor> t = ref;
            if (t.has_value()) visit(*t);
          }
        }
      }
    }
    const bool cache = !hmp;
    for (size_t i = base; i < stack->size(); i++) {
      c10::IValue& v = (*stack)[i];
      const std::string& name = args[i - base].name();
      if (v.isTensor()) {
        const at::Tensor& t = v.toTensor();
        if (eligible(t) && t.scalar_type() != to) v = cast(op, name, t, to, cache, hmp);
      } else if (v.isTensorList()) {
        std::vector<at::Tensor> ts = v.toTensorVector();
        bool changed = false;
        for (auto& t : ts) {
          if (eligible(t) && t.scalar_type() != to) {
            t = cast(op, name, t, to, cache, hmp);
            changed = true;
          }
        }
        if (changed) v = c10::IValue(c10::List<at::Tensor>(ts));
      } else if (v.isOptionalTensorList()) {
        c10::List<std::optional<at::Tensor>> out;
        bool changed = false;
        for (const auto& ref : v.toOptionalTensorList()) {
          std::optional<at::Tensor> t = ref;
          if (t.has_value() && eligible(*t) && t->scalar_type() != to) {
            t = cast(op, name, *t, to, cache, hmp);
            changed = true;
          }
          out.push_back(t);
        }
        if (changed) v = c10::IValue(out);
      }
    }
  }

  int policy_[2];
};

// Ops in no list: nothing to do at the autocast key.
TORCH_LIBRARY_IMPL(_, AutocastHPU, m) {
  m.fallback(torch::CppFunction::makeFallthrough());
}

// Loaded tables ("name" or "name.overload" -> policy) and the registration
// that carries them.
struct State {
  std::mutex mu;
  std::map<std::string, int> table[2];
  std::unique_ptr<torch::Library> lib;
};
State& state() {
  static State* s = new State();  // never destroyed: kernels may run at exit
  return *s;
}

// aten ops by base name -> overload names (built once from the dispatcher).
const std::map<std::string, std::vector<std::string>>& aten_overloads() {
  static const auto* by_name = [] {
    auto* m = new std::map<std::string, std::vector<std::string>>();
    for (const c10::OperatorName& n : c10::Dispatcher::singleton().getAllOpNames()) {
      if (n.name.rfind("aten::", 0) != 0) continue;
      (*m)[n.name.substr(6)].push_back(n.overload_name);
    }
    return m;
  }();
  return *by_name;
}

std::string key_of(const std::string& name, const std::string& overload) {
  return overload.empty() ? name : name + "." + overload;
}

bool is_mutable(const std::string& name, const std::string& overload) {
  auto op = c10::Dispatcher::singleton().findSchema({"aten::" + name, overload});
  return !op.has_value() || op->schema().is_mutable();
}

struct OpList {
  hpu_oplist_t* list = nullptr;
  ~OpList() { hpu_oplist_free(list); }
};

[[noreturn]] void raise_os_error(const std::string& msg) {
  PyErr_SetString(PyExc_OSError, msg.c_str());
  throw py::error_already_set();
}

// Reads the lists (path "" = no list), resolves them against the dispatcher
// and returns the per-overload table. Errors name the file and line.
std::map<std::string, int> read_lists(const std::vector<std::string>& paths, const std::vector<int>& policies,
                                      const std::vector<bool>& user_given) {
  const size_t n = paths.size();
  std::vector<OpList> lists(n);
  std::vector<hpu_oplist_t*> raw(n, nullptr);
  std::vector<int> given(n, 0);
  for (size_t i = 0; i < n; i++) {
    given[i] = i < user_given.size() && user_given[i];
    if (paths[i].empty()) continue;
    hpu_status_t st = hpu_oplist_read(paths[i].c_str(), &lists[i].list);
    if (st == HPU_ERROR_SYSTEM) raise_os_error(hpu_last_error());
    if (st != HPU_SUCCESS) throw py::value_error(hpu_last_error());
    raw[i] = lists[i].list;
  }
  if (hpu_oplist_resolve(raw.data(), given.data(), n) != HPU_SUCCESS) throw py::value_error(hpu_last_error());

  const auto& ops = aten_overloads();
  std::map<std::string, int> table;
  for (size_t i = 0; i < n; i++) {
    hpu_oplist_t* l = raw[i];
    for (size_t j = 0; j < hpu_oplist_size(l); j++) {
      std::string entry = hpu_oplist_name(l, j);
      std::string where = std::string(hpu_oplist_path(l)) + ":" + std::to_string(hpu_oplist_line(l, j)) + ": ";
      size_t dot = entry.find('.');
      std::string name = entry.substr(0, dot);
      auto it = ops.find(name);
      if (it == ops.end())
        throw py::value_error(where + "'" + entry + "' is not a PyTorch op (no aten::" + name +
                              "; list aten op names such as 'addmm' or 'cross_entropy_loss')");
      std::vector<std::string> chosen;
      if (dot != std::string::npos) {
        std::string overload = entry.substr(dot + 1);
        bool found = false;
        for (const auto& o : it->second) found = found || o == overload;
        if (!found) throw py::value_error(where + "aten::" + name + " has no overload '" + overload + "'");
        if (is_mutable(name, overload))
          throw py::value_error(where + "aten::" + entry +
                                " writes to an argument (in-place or out=); autocast cannot cast it");
        chosen.push_back(overload);
      } else {
        for (const auto& o : it->second)
          if (!is_mutable(name, o)) chosen.push_back(o);
        if (chosen.empty())
          throw py::value_error(where + "aten::" + name +
                                " writes to its arguments (in-place or out=); autocast cannot cast it, list "
                                "the functional op instead");
      }
      for (const auto& o : chosen) table[key_of(name, o)] = policies[i];
    }
  }
  return table;
}

// Registers the kernel for the union of both tables (replacing the previous
// registration). Called with the state lock held.
void reregister(State& s) {
  s.lib.reset();
  auto lib = std::make_unique<torch::Library>(torch::Library::IMPL, "aten", c10::DispatchKey::AutocastHPU,
                                              __FILE__, __LINE__);
  std::map<std::string, std::pair<int, int>> both;
  for (const auto& [k, p] : s.table[kAutocastTable]) both[k].first = p;
  for (const auto& [k, p] : s.table[kHmpTable]) both[k].second = p;
  for (const auto& [k, p] : both)
    lib->impl(k.c_str(), torch::CppFunction::makeFromBoxedFunctor(std::make_unique<AutocastKernel>(p.first, p.second)));
  s.lib = std::move(lib);
}

// table: 0 autocast, 1 HMP. paths/policies in parallel; "" = no list.
void load(int table, const std::vector<std::string>& paths, const std::vector<int>& policies,
          const std::vector<bool>& user_given) {
  TORCH_CHECK_VALUE(table == kAutocastTable || table == kHmpTable, "bad autocast table ", table);
  TORCH_CHECK_VALUE(paths.size() == policies.size(), "paths and policies differ in length");
  for (int p : policies) TORCH_CHECK_VALUE(p >= kLower && p <= kLowerFp32Out, "bad autocast policy ", p);
  std::map<std::string, int> t = read_lists(paths, policies, user_given);
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  s.table[table] = std::move(t);
  reregister(s);
}

std::map<std::string, std::string> policies(int table) {
  TORCH_CHECK_VALUE(table == kAutocastTable || table == kHmpTable, "bad autocast table ", table);
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  std::map<std::string, std::string> out;
  for (const auto& [k, p] : s.table[table]) out[k] = policy_name(p);
  return out;
}

std::string source_hmp_dir() {
  std::string f = __FILE__;  // <source>/backend/hpu_autocast.cpp
  size_t slash = f.rfind('/');
  if (slash == std::string::npos) return "";
  f = f.substr(0, slash);
  slash = f.rfind('/');
  return slash == std::string::npos ? std::string("hmp") : f.substr(0, slash) + "/hmp";
}

}  // namespace

// Called from module.cpp: the Python face of this file.
void init_autocast_bindings(py::module_& m) {
  m.def("_amp_load", [](int table, const std::vector<std::string>& paths, const std::vector<int>& pols,
                        const std::vector<bool>& user_given) {
    try {
      load(table, paths, pols, user_given);
    } catch (const c10::Error& e) {
      throw py::value_error(e.what_without_backtrace());
    }
  });
  m.def("_amp_policies", [](int table) { return policies(table); });
  m.def("_amp_source_hmp_dir", &source_hmp_dir);
  m.def("_hmp_set_thread", [](bool on) { t_hmp = on; });
  m.def("_hmp_thread_enabled", [] { return t_hmp; });
  m.def("_hmp_set_verbose", [](bool on) { g_verbose.store(on); });
  m.def("_hmp_verbose", [] { return g_verbose.load(); });
}

}  // namespace habana_torch
