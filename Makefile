# SPDX-License-Identifier: MIT
# Convenience targets; the build itself is CMake (see CMakePresets.json).
.PHONY: all demo test test-quick bench install clean

all:
	scripts/deps.sh
	cmake --preset release -G Ninja >/dev/null
	cmake --build build/release

demo:
	scripts/demo.sh

test:
	scripts/test.sh

test-quick:
	scripts/test.sh quick

bench: all
	build/release/bench/bench_runtime

install: all
	cmake --install build/release

clean:
	rm -rf build
