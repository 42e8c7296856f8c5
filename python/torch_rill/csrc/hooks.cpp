// SPDX-License-Identifier: MIT
// The hooks PyTorch asks of an out-of-tree device (availability, device
// count and current device, pinned host memory, random generators), and
// the generators: each rill device draws from a CPU generator of its own, so
// that the CPU kernels the fallback runs draw from it and torch.manual_seed
// reaches it.
#include <mutex>
#include <vector>

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/core/Generator.h>
#include <ATen/detail/PrivateUse1HooksInterface.h>

#include "generator.h"
#include "pinned.h"
#include "runtime.h"

namespace torch_rill {
namespace {

// A rill device's generator as PyTorch sees it: its seed and state are
// those of the CPU generator the device's kernels draw from.
struct RillGenerator final : public c10::GeneratorImpl {
    mutable at::Generator engine; // its mutex guards the state

    RillGenerator(c10::DeviceIndex index, at::Generator from)
        : c10::GeneratorImpl(c10::Device(kDeviceType, index),
                             c10::DispatchKeySet(c10::DispatchKey::PrivateUse1)),
          engine(std::move(from)) {}

    void set_current_seed(uint64_t seed) override {
        std::lock_guard<std::mutex> guard(engine.mutex());
        engine.set_current_seed(seed);
    }
    void set_offset(uint64_t offset) override {
        std::lock_guard<std::mutex> guard(engine.mutex());
        engine.set_offset(offset);
    }
    uint64_t get_offset() const override {
        std::lock_guard<std::mutex> guard(engine.mutex());
        return engine.get_offset();
    }
    uint64_t current_seed() const override {
        std::lock_guard<std::mutex> guard(engine.mutex());
        return engine.current_seed();
    }
    uint64_t seed() override {
        std::lock_guard<std::mutex> guard(engine.mutex());
        return engine.seed();
    }
    void set_state(const c10::TensorImpl &state) override {
        std::lock_guard<std::mutex> guard(engine.mutex());
        engine.unsafeGetGeneratorImpl()->set_state(state);
    }
    c10::intrusive_ptr<c10::TensorImpl> get_state() const override {
        std::lock_guard<std::mutex> guard(engine.mutex());
        return engine.unsafeGetGeneratorImpl()->get_state();
    }
    RillGenerator *clone_impl() const override {
        std::lock_guard<std::mutex> guard(engine.mutex());
        return new RillGenerator(device().index(), engine.clone());
    }
};

std::vector<at::Generator> &defaults() {
    static std::vector<at::Generator> gens = [] {
        std::vector<at::Generator> out;
        for (c10::DeviceIndex i = 0; i < device_count(); i++)
            out.push_back(at::make_generator<RillGenerator>(
                i, at::make_generator<at::CPUGeneratorImpl>(c10::default_rng_seed_val)));
        return out;
    }();
    return gens;
}

struct Hooks final : public at::PrivateUse1HooksInterface {
    bool isBuilt() const override {
        return true;
    }
    bool isAvailable() const override {
        return device_count() > 0;
    }
    bool hasPrimaryContext(c10::DeviceIndex) const override {
        return true;
    }
    c10::DeviceIndex deviceCount() const override {
        return device_count();
    }
    void setCurrentDevice(c10::DeviceIndex index) const override {
        set_device(index);
    }
    c10::DeviceIndex getCurrentDevice() const override {
        return current_device();
    }
    c10::DeviceIndex exchangeDevice(c10::DeviceIndex index) const override {
        c10::DeviceIndex prev = current_device();
        if (index >= 0 && index != prev)
            set_device(index);
        return prev;
    }
    c10::DeviceIndex maybeExchangeDevice(c10::DeviceIndex index) const override {
        return exchangeDevice(index);
    }
    // pin_memory() and is_pinned() of CPU tensors (pinned.cpp).
    at::Allocator *getPinnedMemoryAllocator() const override {
        return host_allocator();
    }
    bool isPinnedPtr(const void *data) const override {
        return is_pinned_ptr(data);
    }
    const at::Generator &getDefaultGenerator(c10::DeviceIndex index) const override {
        if (index < 0)
            index = current_device();
        auto &gens = defaults();
        TORCH_CHECK(index < static_cast<c10::DeviceIndex>(gens.size()),
                    "rill:", static_cast<int>(index), " is not a device");
        return gens[index];
    }
    at::Generator getNewGenerator(c10::DeviceIndex index) const override {
        if (index < 0)
            index = current_device();
        return at::make_generator<RillGenerator>(
            index, at::make_generator<at::CPUGeneratorImpl>(c10::default_rng_seed_val));
    }
};

} // namespace

at::Generator cpu_engine(const std::optional<at::Generator> &gen, c10::DeviceIndex index) {
    const at::Generator &rill_gen =
        gen.has_value() && gen->defined() ? *gen : defaults().at(index < 0 ? 0 : index);
    if (rill_gen.device().type() == c10::DeviceType::CPU)
        return rill_gen;
    auto *impl = dynamic_cast<RillGenerator *>(rill_gen.unsafeGetGeneratorImpl());
    TORCH_CHECK(impl, "a generator of ", rill_gen.device(), " cannot draw for rill");
    return impl->engine;
}

void register_hooks() {
    static Hooks hooks;
    at::RegisterPrivateUse1HooksInterface(&hooks);
}

} // namespace torch_rill
