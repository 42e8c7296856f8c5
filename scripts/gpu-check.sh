#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The whole check of rill on a machine with an NVIDIA GPU, in under 10 minutes
# (one command of a 12-minute GPU session): the driver's and the toolkit's
# versions, compared; the release build (warnings listed, not errors: the GPU
# machine's compiler, gcc 13, may warn where CI's does not); then, most
# valuable first, on cuda:0 when rill lists a CUDA device: the contract
# tests, the seeds, the benchmarks (bench_cuda_baseline against the CUDA
# runtime, torch.mm), the contract tests under compute-sanitizer (memcheck,
# racecheck; the tests' CUDA runs only, each with its ctest environment),
# and after them the demo, the collectives at -np 2, the stress tests (on
# the CPU device), the python label, the whole suite, the asan-ubsan build
# with the contract tests in it, and the CPU benchmarks' quick runs. It
# runs, and finishes, on a machine without a GPU too: the GPU steps are
# then skipped with the reason.
#
# Every step is independent (a failed step stops none of the others),
# bounded by `timeout`, and logged; all steps share one time budget, and a
# step that would start past it is skipped. At the end a summary gives
# each step's result (passed, failed or skipped), its counts and time.
# Exit status: 1 when a step failed, else 0.
#
# Output, in OUT (default /tmp/gpu-check):
#   summary.txt     the summary             bench.txt    the benchmarks' tables
#   gpu-check.log   everything printed      bench.json   their JSON, one key per program
#   steps.tar.gz    each step's full log (steps/NN-name.log) and JSON
#
# Environment:
#   GPU_CHECK_BUDGET  seconds for all steps together (default 540)
#   GPU_CHECK_STEPS   an extended regular expression: only the steps whose
#                     names match run, the others are skipped (default: all)
#   GPU_CHECK_TESTS   an extended regular expression passed to each ctest
#                     step as -R (default: every test of the step's labels)
#
# On a GPU machine without cmocka, BLIS and oneDNN (Ubuntu with CUDA),
# prepare their packages on a Debian machine with
#   ../shared/gpu/carry-deps.sh libdnnl-dev libdnnl2 ocl-icd-libopencl1
# (it writes .gpu-deps/), copy the checkout with .gpu-deps to the GPU machine, and run
#   bash .gpu-deps/install.sh && scripts/gpu-check.sh
# (the script also runs .gpu-deps/install.sh itself when it finds it).
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
OUT=${OUT:-/tmp/gpu-check}
budget=${GPU_CHECK_BUDGET:-540}
only=${GPU_CHECK_STEPS:-}
tests=${GPU_CHECK_TESTS:-}
jobs=$(nproc)
# ctest's parallelism: each test runs 4 or more threads of its own.
ctest_jobs=$(((jobs + 3) / 4 > 1 ? (jobs + 3) / 4 : 2))
mkdir -p "$OUT"
steps_dir="$OUT/steps"
json_dir="$steps_dir/json"
rm -rf "$steps_dir"
mkdir -p "$json_dir"
rm -f "$OUT/warnings.txt"
# The toolkit's tools (compute-sanitizer among them) where a toolkit puts
# them, in case the PATH lacks them.
export PATH="$PATH:/usr/local/cuda/bin:/usr/local/cuda/compute-sanitizer"
# cuBLAS and cuDNN, which rill loads at run time: the toolkit's, and those of
# PyTorch's wheels (site-packages/nvidia/{cublas,cudnn}/lib), where the
# loader's paths lack them.
for d in /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib; do
    [ -d "$d" ] && export LD_LIBRARY_PATH="${LD_LIBRARY_PATH:+$LD_LIBRARY_PATH:}$d"
done
pip_nvidia=$(python3 -c 'import nvidia, os; print(list(nvidia.__path__)[0])' 2>/dev/null || true)
if [ -n "$pip_nvidia" ]; then
    for d in "$pip_nvidia"/cudnn/lib "$pip_nvidia"/cublas/lib; do
        [ -d "$d" ] && export LD_LIBRARY_PATH="${LD_LIBRARY_PATH:+$LD_LIBRARY_PATH:}$d"
    done
fi
# rill's CUDA device is off by default until this check passes on a GPU
# (docs/cuda.md): every step here turns it on.
export RILL_CUDA_ENABLE=1
# Open MPI refuses root without these; the GPU machines run as root.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
start=$(date +%s)
results=() # name|result|seconds|detail
n=0

# ---- steps ----

record() { # NAME RESULT SECONDS DETAIL
    results+=("$1|$2|$3|$4")
    printf '== %-16s %-8s %4s s  %s\n' "$1" "$2" "$3" "$4"
}
skip() { record "$1" skipped 0 "$2"; }
selected() { [ -z "$only" ] || [[ $1 =~ ^($only)$ ]]; }

# Runs one step's command: `run_step NAME LIMIT_S COMMAND...` under timeout,
# its output in steps/NN-NAME.log. Sets step_rc (125: not started, out of
# time), step_secs and step_log.
run_step() {
    local name=$1 limit=$2
    shift 2
    n=$((n + 1))
    step_log=$(printf '%s/%02d-%s.log' "$steps_dir" "$n" "$name")
    local left=$((budget - ($(date +%s) - start)))
    step_secs=0
    if ((left < 10)); then
        step_rc=125
        echo "not started: ${left} s of the budget left" >"$step_log"
        return
    fi
    ((limit > left)) && limit=$left
    local shown="$*"
    shown=${shown//$'\n'/ }
    echo "== $name (at most ${limit} s): ${shown:0:150}"
    local t0
    t0=$(date +%s)
    timeout -k 10 "$limit" "$@" >"$step_log" 2>&1 </dev/null
    step_rc=$?
    step_secs=$(($(date +%s) - t0))
    if ((step_rc == 124 || step_rc == 137)); then
        echo "gpu-check: stopped after ${limit} s" >>"$step_log"
    fi
}

# Records the step that run_step ran: passed on status 0, skipped on
# status 77 (with the log's last line) or when it did not start, else
# failed, with the end of its log.
finish() { # NAME [DETAIL]
    local name=$1 detail=${2:-}
    if ((step_rc == 125)); then
        record "$name" skipped 0 "out of time (GPU_CHECK_BUDGET=${budget})"
    elif ((step_rc == 0)); then
        record "$name" passed "$step_secs" "$detail"
    elif ((step_rc == 77)); then
        record "$name" skipped "$step_secs" "$(tail -n 1 "$step_log")"
    else
        local why="exit $step_rc"
        ((step_rc == 124 || step_rc == 137)) && why="timed out"
        record "$name" failed "$step_secs" "$why${detail:+; $detail}; steps/$(basename "$step_log")"
        tail -n 25 "$step_log" | sed 's/^/    /'
    fi
}

# A ctest run: `ctest_step NAME LIMIT_S BUILD_DIR DEVICE CTEST_ARGS...`, with
# RILL_DEVICE=DEVICE unless DEVICE is empty (then without RILL_CUDA_ENABLE).
# "No tests" is skipped, never passed; the counts come from ctest's own
# summary.
ctest_step() {
    local name=$1 limit=$2 dir=$3 device=$4
    shift 4
    selected "$name" || {
        skip "$name" "not selected"
        return
    }
    local filter=()
    [ -n "$tests" ] && filter=(-R "$tests")
    # Without a device named, the tests run on rill's default device as in
    # CI: the CUDA device stays off for them (tests of their own, such as
    # the contract tests' CUDA runs, turn it on).
    local enable=(-u RILL_CUDA_ENABLE)
    [ -n "$device" ] && enable=()
    run_step "$name" "$limit" env "${enable[@]}" ${device:+RILL_DEVICE=$device} ctest --test-dir "$dir" \
        --output-on-failure --no-tests=error -j "$ctest_jobs" --timeout 120 "$@" "${filter[@]}"
    if grep -q "No tests were found" "$step_log"; then
        record "$name" skipped "$step_secs" "no tests match: ctest $* ${filter[*]}"
        return
    fi
    local total failed skipped
    # "100% tests passed, 0 tests failed out of 3", or from CMake 4 without
    # failures "100% tests passed out of 3".
    total=$(sed -nE 's/.* tests (failed|passed) out of ([0-9]+).*/\2/p' "$step_log" | tail -n 1)
    failed=$(sed -nE 's/.* ([0-9]+) tests failed out of .*/\1/p' "$step_log" | tail -n 1)
    failed=${failed:-0}
    skipped=$(grep -cE '^[[:space:]]+[0-9]+ - .*\(Skipped\)$' "$step_log")
    local counts="no ctest summary"
    [ -n "$total" ] &&
        counts="$((total - failed - skipped)) passed, $failed failed, $skipped skipped of $total"
    [ -n "$device" ] && counts="$counts, RILL_DEVICE=$device"
    finish "$name" "$counts"
}

# The compiler's warnings in a build's log: appended to warnings.txt
# (each once, under the step's name) and printed; says how many.
warnings() { # STEP LOG
    local list
    list=$(grep -E '(warning|Warning):' "$2" | sort -u)
    if [ -z "$list" ]; then
        echo "no warnings"
        return
    fi
    {
        echo "---- $1"
        echo "$list"
    } >>"$OUT/warnings.txt"
    echo "$list" | head -n 20 | sed 's/^/    /' >&2
    echo "$(echo "$list" | wc -l) warnings (warnings.txt)"
}

# A program's run: `program_step NAME LIMIT_S COMMAND...`.
program_step() {
    local name=$1
    if ! selected "$name"; then
        skip "$name" "not selected"
        return 1
    fi
    run_step "$@"
    return 0
}

# The commands of the ctest tests that carry LABEL in BUILD_DIR and whose
# names end in SUFFIX, one per line: the test's own ENVIRONMENT
# (RILL_TEST_DEVICE=cuda and the like), a unit separator (\037), and the
# command, both quoted for bash, so that a tool that runs it runs what
# ctest runs.
test_commands() { # BUILD_DIR LABEL SUFFIX
    # contract_lost faults the GPU on purpose: not for the sanitizers.
    ctest --test-dir "$1" -L "$2" ${tests:+-R "$tests"} --show-only=json-v1 2>/dev/null |
        python3 -c 'import json, shlex, sys
suffix = sys.argv[1]
for t in json.load(sys.stdin).get("tests", []):
    name = t.get("name", "")
    if not t.get("command") or name.startswith("contract_lost") or not name.endswith(suffix):
        continue
    env = []
    for p in t.get("properties", []):
        if p.get("name") == "ENVIRONMENT":
            env = list(p.get("value", []))
    print(shlex.join(env) + "\037" + shlex.join(t["command"]))' "$3"
}

# The compute-sanitizer step: `sanitize_step NAME TOOL`. The subset is, on
# cuda:0, the contract tests' CUDA runs (contract_*_cuda, with their ctest
# environment) and the quickstart example, then bench_cuda_baseline's quick
# run without the matrix products (nor, under racecheck, the graph replays).
sanitize_step() {
    local name=$1 tool=$2
    selected "$name" || {
        skip "$name" "not selected"
        return
    }
    if ! command -v compute-sanitizer >/dev/null; then
        skip "$name" "compute-sanitizer not found (it comes with the CUDA toolkit)"
        return
    fi
    if [ -z "$gpu" ]; then
        skip "$name" "no GPU: $gpu_why"
        return
    fi
    local list="$steps_dir/$name.commands"
    : >"$list"
    if [ -n "$rill_cuda" ]; then
        test_commands build/release contract _cuda >>"$list"
        [ -x build/release/examples/quickstart ] &&
            printf '\037%s\n' build/release/examples/quickstart >>"$list"
    fi
    # Racecheck takes minutes over the graph replays of 1,000 kernels (d).
    local rows=a,b,c,d,e,f,g,h
    [ "$tool" = racecheck ] && rows=a,b,c,e,f,g,h
    [ -x "$bench_cuda" ] && printf '\037%s\n' "$bench_cuda --quick --only $rows" >>"$list"
    if [ ! -s "$list" ]; then
        skip "$name" "nothing to run: no bench_cuda_baseline and no rill CUDA device"
        return
    fi
    run_step "$name" 150 env ${rill_cuda:+RILL_DEVICE=$rill_cuda} bash -c '
        tool=$1 list=$2 failed=0 count=0
        sep=$(printf "\037")
        while IFS=$sep read -r envs cmd; do
            count=$((count + 1))
            echo "== $envs compute-sanitizer --tool $tool $cmd"
            eval "env $envs compute-sanitizer --tool $tool --error-exitcode 86 --print-limit 20 $cmd"
            rc=$?
            # 77: a test that found no device for itself, not an error of the tool.
            if [ $rc -ne 0 ] && [ $rc -ne 77 ]; then
                echo "== failed: exit $rc"
                failed=$((failed + 1))
            fi
        done <"$list"
        echo "$((count - failed)) of $count programs clean"
        [ $failed -eq 0 ]' _ "$tool" "$list"
    finish "$name" "$(tail -n 1 "$step_log")"
}

main() {
    echo "gpu-check: $(git rev-parse --short HEAD 2>/dev/null || echo '?') on $(hostname), $jobs" \
        "processors, budget ${budget} s, output in $OUT"

    # -- the machine --
    if ! selected deps; then
        skip deps "not selected"
    elif [ -f .gpu-deps/install.sh ]; then
        run_step deps 60 bash .gpu-deps/install.sh
        finish deps "$(tail -n 1 "$step_log")"
    else
        skip deps "no .gpu-deps/install.sh: cmocka and BLIS must be installed already"
    fi

    gpu="" gpu_why=""
    if ! command -v nvidia-smi >/dev/null; then
        gpu_why="no nvidia-smi (no NVIDIA driver)"
        skip gpu "$gpu_why"
    elif program_step gpu 30 bash -c 'nvidia-smi --query-gpu=name,driver_version,memory.total,compute_cap --format=csv,noheader && nvidia-smi'; then
        if ((step_rc == 0)); then
            gpu=$(head -n 1 "$step_log")
            finish gpu "$gpu"
        else
            gpu_why="nvidia-smi failed"
            finish gpu
        fi
    else
        gpu_why="the gpu step was not selected"
    fi

    program_step tools 30 bash -c '
        cmake --version | head -n 1; echo "ninja $(ninja --version)"; cc --version | head -n 1
        echo "pkg-config $(pkg-config --version 2>&1)"
        if command -v nvcc >/dev/null; then nvcc --version | tail -n 2; else echo "nvcc: none"; fi
        if command -v compute-sanitizer >/dev/null; then compute-sanitizer --version | tail -n 1
        else echo "compute-sanitizer: none"; fi
        python3 -c "import torch; print(\"torch\", torch.__version__, \"CUDA\", torch.version.cuda)" 2>&1 | tail -n 1' &&
        finish tools "$(grep -v '^Built on' "$step_log" | tr '\n' ' ' | tr -s ' ' | cut -c1-160)"

    # The driver's CUDA version against the toolkit's: PTX from a toolkit
    # newer than the driver does not load (CUDA_ERROR_UNSUPPORTED_PTX_VERSION).
    # The ops' fatbin carries an sm_90 cubin, which an H100/H200 loads
    # without the PTX; the tests' and examples' kernels are PTX alone.
    if [ -z "$gpu" ]; then
        skip versions "no GPU: ${gpu_why}"
    elif program_step versions 30 bash -c '
        driver=$(nvidia-smi --query-gpu=driver_version --format=csv,noheader | head -n 1)
        driver_cuda=$(nvidia-smi | sed -nE "s/.*CUDA Version: *([0-9]+[.][0-9]+).*/\1/p" | head -n 1)
        toolkit=$(nvcc --version 2>/dev/null | sed -nE "s/.*release ([0-9]+[.][0-9]+).*/\1/p")
        echo "driver $driver for CUDA ${driver_cuda:-?}; toolkit ${toolkit:-none (no nvcc)}"
        [ -n "$toolkit" ] && [ -n "$driver_cuda" ] || exit 0
        newest=$(printf "%s\n%s\n" "$toolkit" "$driver_cuda" | sort -V | tail -n 1)
        if [ "$newest" != "$driver_cuda" ]; then
            echo "the toolkit ($toolkit) is newer than the driver (CUDA $driver_cuda): the PTX it makes may not load (the sm_90 cubin of the ops loads); update the driver"
            exit 1
        fi'; then
        finish versions "$(head -n 1 "$step_log")"
    fi

    # -- the release build, and what rill sees --
    # The Python tests need an interpreter with cffi, numpy and pytest:
    # Debian's /usr/bin/python3, else the first python3 on the PATH that has them.
    local python="" p
    for p in /usr/bin/python3 "$(command -v python3)"; do
        if [ -x "$p" ] && "$p" -c 'import cffi, numpy, pytest' 2>/dev/null; then
            python=$p
            break
        fi
    done
    local python_flag=(-DRILL_BUILD_PYTHON=OFF)
    [ -n "$python" ] && python_flag=(-DRILL_PYTHON="$python")
    # Without oneDNN (../shared/gpu/carry-deps.sh carries libdnnl-dev), rill's own
    # CPU kernels run; the CUDA device is the same either way.
    if ! echo '#include <oneapi/dnnl/dnnl.h>' | cc -E -x c - >/dev/null 2>&1; then
        python_flag+=(-DRILL_ONEDNN=OFF)
        echo "gpu-check: no oneDNN headers, so the build is -DRILL_ONEDNN=OFF"
    fi
    # Warnings are not errors here: CI builds with them as errors, and a
    # newer compiler's new warnings must not cost the GPU hour; they are
    # listed (warnings.txt) instead.
    if program_step build-release 200 bash -c 'cmake --preset release -G Ninja -DRILL_WERROR=OFF "${@:2}" && cmake --build build/release -j "$1"' _ "$jobs" "${python_flag[@]}"; then
        finish build-release "$(grep -c '^\[' "$step_log") build steps, $(warnings build-release "$step_log")"
    fi
    bench_cuda=build/release/bench/cuda/bench_cuda_baseline

    rill_cuda="" rill_why=""
    if [ ! -x build/release/rill ]; then
        skip rill-devices "no build/release/rill"
        rill_why="no build/release/rill"
    elif program_step rill-devices 30 build/release/rill info; then
        if ((step_rc == 0)) && grep -Eq '^[* ][[:space:]]+[0-9]+[[:space:]]+cuda[[:space:]]' "$step_log"; then
            rill_cuda=cuda:0
            finish rill-devices "cuda:0 is $(grep -E '^[* ][[:space:]]+[0-9]+[[:space:]]+cuda' "$step_log" | head -n 1 | sed -E 's/^[* ]+[0-9]+ +cuda +//; s/  +.*//')"
        elif ((step_rc == 0)) && [ -n "$gpu" ] && [ -d src/backend/cuda ]; then
            rill_why="rill lists no CUDA device beside a GPU"
            step_rc=1
            finish rill-devices "$rill_why: $(grep -i cuda "$step_log" | head -n 1)"
        elif ((step_rc == 0)); then
            rill_why="rill lists no CUDA device"
            [ -d src/backend/cuda ] || rill_why="$rill_why (this version has no CUDA backend)"
            record rill-devices skipped "$step_secs" "$rill_why"
        else
            rill_why="rill info failed"
            finish rill-devices
        fi
    fi

    # -- tests on cuda:0, the most valuable first --
    local no_cuda="${rill_why:-no rill CUDA device}"
    if [ -n "$rill_cuda" ]; then
        ctest_step contract 90 build/release "$rill_cuda" -L contract
        ctest_step seeds 90 build/release "$rill_cuda" -L seeds
    else
        skip contract "$no_cuda"
        skip seeds "$no_cuda; the seeds run on the CPU device in ctest-all"
    fi

    # -- the GPU's figures --
    if [ ! -x "$bench_cuda" ]; then
        skip bench-cuda "no $bench_cuda (no nvcc at build time, or the build failed)"
    elif program_step bench-cuda 150 "$bench_cuda" --json "$json_dir/bench_cuda_baseline.json"; then
        finish bench-cuda "$(grep -cE '^[a-i][0-9] ' "$step_log") rows"
    fi
    local compare=()
    [ -s "$json_dir/bench_cuda_baseline.json" ] &&
        compare=(--compare "$json_dir/bench_cuda_baseline.json")
    program_step torch-mm 90 python3 bench/cuda/torch_mm.py --json "$json_dir/torch_mm.json" \
        "${compare[@]}" && finish torch-mm "$(grep -c '^i[0-9] ' "$step_log") rows"

    # -- the contract tests' CUDA runs under compute-sanitizer --
    sanitize_step memcheck memcheck
    sanitize_step racecheck racecheck

    # -- rill demo, the README's first command, on cuda:0 --
    if [ -z "$rill_cuda" ]; then
        skip demo "${rill_why:-no rill CUDA device}"
    elif program_step demo 90 env RILL_DEVICE="$rill_cuda" build/release/rill demo --no-trace; then
        finish demo "$(grep -E 'speedup of (streams|the graph)' "$step_log" | tr -s ' ' | tr '\n' ';')"
    fi

    if [ -n "$rill_cuda" ]; then
        # Collectives on cuda:0's memory, two ranks sharing the GPU (built
        # where CMake found MPI; none match otherwise).
        ctest_step mpi-cuda 90 build/release "$rill_cuda" -L cuda -R '^mpi_'
    else
        skip mpi-cuda "$no_cuda"
    fi
    # The stress tests on rill's CPU device: their kernels are CPU functions,
    # and the host reads their memory.
    ctest_step stress 120 build/release "" -L stress

    # -- the Python package on cuda:0 (the default device where rill has
    # one): the seeds' Python examples and the tests, beside PyTorch --
    if [ -z "$python" ]; then
        skip python "no python3 with cffi, numpy and pytest"
    else
        ctest_step python 150 build/release "$rill_cuda" -L python
    fi
    # -- the whole suite (but stress and python, run above) on the default device --
    ctest_step ctest-all 240 build/release "" -LE 'stress|python'

    # -- the debug build: ASan+UBSan, and the contract tests in it on cuda:0 --
    program_step build-debug 200 bash -c 'cmake --preset asan-ubsan -G Ninja -DRILL_WERROR=OFF -DRILL_BUILD_PYTHON=OFF && cmake --build build/asan-ubsan -j "$1"' _ "$jobs" &&
        finish build-debug "$(grep -c '^\[' "$step_log") build steps, $(warnings build-debug "$step_log")"
    if [ -z "$rill_cuda" ]; then
        skip contract-debug "$no_cuda"
    elif [ ! -d build/asan-ubsan ]; then
        skip contract-debug "no debug build"
    else
        # The CUDA driver maps memory where ASan keeps its shadow gap, and
        # keeps allocations of its own to the process's end (not rill's leaks).
        export ASAN_OPTIONS=protect_shadow_gap=0:detect_leaks=0
        ctest_step contract-debug 120 build/asan-ubsan "$rill_cuda" -L contract
        unset ASAN_OPTIONS
    fi

    # -- the CPU benchmarks' quick runs --
    local b
    for b in bench_runtime bench_graph bench_memory; do
        if [ ! -x "build/release/bench/$b" ]; then
            skip "${b/_/-}" "no build/release/bench/$b"
        elif program_step "${b/_/-}" 60 env -u RILL_CUDA_ENABLE "build/release/bench/$b" --quick \
            --json "$json_dir/$b.json"; then
            finish "${b/_/-}" "$(grep -cE '^[a-z]+[0-9]+ ' "$step_log") rows, quick"
        fi
    done
    # -- the CPU device against its number of workers (the GPU machine's
    #    processors are more than CI's) --
    if [ ! -x build/release/bench/bench_graph ]; then
        skip sweep-workers "no build/release/bench"
    elif program_step sweep-workers 150 env -u RILL_CUDA_ENABLE python3 bench/sweep_workers.py --build build/release \
        --quick --machine "the GPU machine: $(nproc) processors, $(grep -m1 'model name' \
        /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')" --json "$json_dir/sweep_workers.json" \
        --svg "$OUT/sweep_workers.svg"; then
        finish sweep-workers "$(grep -c '^| ' "$step_log") table lines"
    fi

    report
}

# ---- the end ----

report() {
    local bench_txt="$OUT/bench.txt" f
    : >"$bench_txt"
    for f in "$steps_dir"/*-bench-cuda.log "$steps_dir"/*-torch-mm.log "$steps_dir"/*-bench-runtime.log \
        "$steps_dir"/*-bench-graph.log "$steps_dir"/*-bench-memory.log; do
        [ -f "$f" ] && {
            echo "---- $(basename "$f" .log | cut -d- -f2-)"
            cat "$f"
            echo
        } >>"$bench_txt"
    done
    python3 - "$json_dir" "$OUT/bench.json" <<'EOF'
import json, os, sys
merged = {}
for name in sorted(os.listdir(sys.argv[1])):
    if name.endswith(".json"):
        try:
            with open(os.path.join(sys.argv[1], name)) as f:
                merged[name[:-5]] = json.load(f)
        except ValueError as e:
            merged[name[:-5]] = {"error": str(e)}
with open(sys.argv[2], "w") as f:
    json.dump(merged, f, indent=1)
EOF
    echo
    echo "==== benchmarks (bench_cuda_baseline; all tables in $OUT/bench.txt)"
    for f in "$steps_dir"/*-bench-cuda.log "$steps_dir"/*-torch-mm.log; do
        [ -f "$f" ] && cat "$f"
    done

    local passed=0 failed=0 skipped=0 r name result secs detail
    {
        echo
        echo "==== gpu-check summary: $(git rev-parse --short HEAD 2>/dev/null || echo '?'), ${gpu:-no GPU ($gpu_why)}, $(($(date +%s) - start)) s"
        printf '%-16s %-8s %6s  %s\n' step result time detail
        for r in "${results[@]}"; do
            IFS='|' read -r name result secs detail <<<"$r"
            printf '%-16s %-8s %4s s  %s\n' "$name" "$result" "$secs" "$detail"
            case $result in
            passed) passed=$((passed + 1)) ;;
            failed) failed=$((failed + 1)) ;;
            *) skipped=$((skipped + 1)) ;;
            esac
        done
        echo "$passed passed, $failed failed, $skipped skipped; logs in $OUT/steps.tar.gz"
    } >"$OUT/summary.txt"
    cat "$OUT/summary.txt"
    tar -czf "$OUT/steps.tar.gz" -C "$OUT" steps && rm -rf "$steps_dir"
    ((failed == 0))
}

main 2>&1 | tee "$OUT/gpu-check.log"
exit "${PIPESTATUS[0]}"
