# SPDX-License-Identifier: MIT
"""Compatibility modules: the seeds' framework APIs on rill, so that their
examples run with only the import lines changed.

    import rill.compat.mindspore as ms       # for: import mindspore as ms
"""
