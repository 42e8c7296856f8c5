// SPDX-License-Identifier: MIT
// rill's traces and sanitizer reports name each command after the aten op
// that submitted it: a RecordFunction callback hands rill the name of each
// op while the op runs (rill_thread_exchange_op_name), so the innermost op
// names what it submits. A callback makes every op of the process build a
// RecordFunction, so it runs only when asked: RILL_TRACE or RILL_SANITIZE in
// the environment at import, or torch.rill.name_ops(True).
#include <cstdlib>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_set>

#include <ATen/record_function.h>

#include "op_names.h"

namespace torch_rill {
namespace {

// Names rill may hold until rill_shutdown. Most ops' names are their
// registered schemas', but a RecordFunction may own its name (one built at
// run time, as in a DDP step with a comm hook): a copy of each name is kept
// for the process.
const char *interned(const char *name) {
    static std::mutex names_lock;
    static auto *names = new std::unordered_set<std::string>(); // never freed
    std::lock_guard<std::mutex> guard(names_lock);
    return names->emplace(name).first->c_str();
}

struct Outer final : at::ObserverContext {
    const char *name = nullptr; // the name the op's caller had
};

std::unique_ptr<at::ObserverContext> enter(const at::RecordFunction &fn) {
    auto outer = std::make_unique<Outer>();
    outer->name = interned(fn.name());
    rill_thread_exchange_op_name(&outer->name);
    return outer;
}

void leave(const at::RecordFunction &, at::ObserverContext *ctx) {
    const char *name = static_cast<Outer *>(ctx)->name;
    rill_thread_exchange_op_name(&name);
}

std::mutex lock;
at::CallbackHandle handle = at::INVALID_CALLBACK_HANDLE;
bool on = false;

} // namespace

void name_ops(bool enabled) {
    std::lock_guard<std::mutex> guard(lock);
    if (enabled == on)
        return;
    if (enabled && handle == at::INVALID_CALLBACK_HANDLE)
        handle = at::addGlobalCallback(
            at::RecordFunctionCallback(&enter, &leave).scopes({at::RecordScope::FUNCTION}));
    else if (enabled)
        at::reenableCallback(handle);
    else
        at::disableCallback(handle);
    on = enabled;
}

bool naming_ops() {
    std::lock_guard<std::mutex> guard(lock);
    return on;
}

void name_ops_from_environment() {
    for (const char *var : {"RILL_TRACE", "RILL_SANITIZE"}) {
        const char *value = std::getenv(var);
        if (value != nullptr && *value != '\0' && std::string(value) != "0") {
            name_ops(true);
            return;
        }
    }
}

} // namespace torch_rill
