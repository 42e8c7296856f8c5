/* SPDX-License-Identifier: MIT */
/* The stream sanitizer (rill_sanitizer_enable): happens-before between the
 * commands of different streams (a vector clock per stream and event, and
 * the host's `done` clock), and the bytes each command declares (records
 * [lo, hi) checked for unordered overlaps where one writes). One mutex
 * guards everything; the hooks run only while the sanitizer is on
 * (core/hooks.h). The rules: docs/design.md, "The stream sanitizer". */
#ifndef RILL_SANITIZER_H
#define RILL_SANITIZER_H

#include "core/hooks.h"

extern const rill__subsystem rill__sanitizer_subsystem;

#endif
