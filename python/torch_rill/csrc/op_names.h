// SPDX-License-Identifier: MIT
// Naming rill's commands after the aten ops that submit them (op_names.cpp).
#pragma once

#include "runtime.h"

namespace torch_rill {

void name_ops(bool enabled);
bool naming_ops();
// Turns naming on when RILL_TRACE or RILL_SANITIZE is set (not empty or 0).
void name_ops_from_environment();

} // namespace torch_rill
