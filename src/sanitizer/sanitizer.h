/* SPDX-License-Identifier: MIT */
/* The stream sanitizer (rill_sanitizer_enable): happens-before between the
 * commands of different streams, and the bytes each command declares.
 *
 * Order. Every stream the sanitizer meets gets an index and a vector clock
 * of what its later work is ordered after: for other streams, the highest
 * command number (seq) reached by a wait (rill_stream_wait_stream,
 * rill_stream_wait_event, the pool's internal waits, a graph launch after
 * the exec's previous launch), with what that stream was itself ordered
 * after. A stream keeps its last clocks, each with the seq after which it
 * holds, so that a wait for an older command takes the clock of that
 * command; an event keeps the clock of its stream at its record, which
 * also counts the waits made since the stream's last command (a wait for
 * work already done submits no command). The host has one clock for the
 * whole process, `done`: the highest seq of each stream that a host wait
 * or query saw complete (synchronize of a stream, an event or a device,
 * rill_memcpy, a query that returned RILL_OK), with what that work was
 * ordered after. It is process-wide
 * because the sanitizer cannot see the program's own locks and joins: a
 * wait on one thread orders what any thread submits afterwards. Command A
 * of stream u, number a, is ordered before command B of stream t when
 * u == t, when t's clock holds u at a or more when B is submitted, or when
 * done[u] >= a by then.
 *
 * Bytes. Each command's declared accesses (launches, the built-in ops,
 * copies, fills, the nodes of a launched graph) are records [lo, hi) with
 * their stream, seq, mode and name, kept sorted by lo. A new access is
 * checked against the records it overlaps: one of the two writes and they
 * are not ordered is a report. Then the records it overlaps, covers whole
 * and is ordered after are dropped when the new one dominates them (a
 * write dominates everything, a read dominates reads): an access that
 * races with a dropped record races with the new one too. A free drops the
 * records of its block after checking them: a use by another stream that
 * neither the free is ordered after nor the pool tracks (uses that
 * launches, copies and fills declare are tracked; graph nodes' and those
 * of a stream without rill_record_stream are not) is a report.
 *
 * Everything is guarded by one mutex; the hooks run only while the
 * sanitizer is on (core/hooks.h), and rill_shutdown forgets every stream
 * and record. */
#ifndef RILL_SANITIZER_H
#define RILL_SANITIZER_H

#include "core/hooks.h"

extern const rill__subsystem rill__sanitizer_subsystem;

#endif
