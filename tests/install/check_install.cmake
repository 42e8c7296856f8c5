# SPDX-License-Identifier: MIT
# Installs the build tree into a scratch prefix, then builds and runs a
# consumer twice: with pkg-config (rill.pc) and with find_package(rill),
# and checks that it links neither MPI nor librill_mpi. With HAVE_MPI, does
# the same for a consumer of librill_mpi (rill_mpi.pc, and find_package(rill
# COMPONENTS mpi)), run as a one-process MPI world. Then builds seed 004's
# ACL program, unchanged, against the installed ACL headers alone (-I from
# rill_acl.pc, which is rill.pc's acl_includedir) and with find_package(rill
# COMPONENTS acl), and compares what it prints with what the seed prints.
# The find_package consumer is configured with GENERATOR and MAKE_PROGRAM
# when given (the build's: CMake's default generator needs make).
# Run as: cmake -DBUILD_DIR=... -DSOURCE_DIR=... -DWORK_DIR=... [-DHAVE_MPI=ON]
#   [-DGENERATOR=Ninja -DMAKE_PROGRAM=/usr/bin/ninja] -P check_install.cmake
set(prefix ${WORK_DIR}/prefix)
file(REMOVE_RECURSE ${WORK_DIR})

function(run)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "failed (${rc}): ${ARGN}\n${out}\n${err}")
  endif()
  set(last_output "${out}" PARENT_SCOPE)
endfunction()

run(${CMAKE_COMMAND} --install ${BUILD_DIR} --prefix ${prefix})

# pkg-config
find_program(PKG_CONFIG pkg-config REQUIRED)
find_program(CC NAMES cc gcc REQUIRED)
file(GLOB pcdirs ${prefix}/lib*/pkgconfig ${prefix}/lib/*/pkgconfig)
string(REPLACE ";" ":" pcpath "${pcdirs}")
set(ENV{PKG_CONFIG_PATH} "${pcpath}")
run(${PKG_CONFIG} --cflags --libs rill)
separate_arguments(flags UNIX_COMMAND "${last_output}")
run(${CC} ${SOURCE_DIR}/tests/install/consumer.c ${flags} -o ${WORK_DIR}/consumer_pc)
run(${WORK_DIR}/consumer_pc)
if(NOT last_output MATCHES "^devices: [0-9]+")
  message(FATAL_ERROR "pkg-config consumer printed: ${last_output}")
endif()

# A program that uses no MPI links neither MPI nor librill_mpi, and neither
# does librill itself.
find_program(READELF readelf REQUIRED)
function(check_no_mpi file)
  run(${READELF} -d ${file})
  if(last_output MATCHES "NEEDED[^\n]*(libmpi|librill_mpi)")
    message(FATAL_ERROR "${file} links MPI:\n${last_output}")
  endif()
endfunction()
check_no_mpi(${WORK_DIR}/consumer_pc)
file(GLOB librill ${prefix}/lib*/librill.so ${prefix}/lib/*/librill.so)
check_no_mpi(${librill})

if(HAVE_MPI)
  run(${PKG_CONFIG} --cflags --libs rill_mpi)
  separate_arguments(flags UNIX_COMMAND "${last_output}")
  run(${CC} ${SOURCE_DIR}/tests/install/consumer_mpi.c ${flags} -o ${WORK_DIR}/consumer_mpi_pc)
  run(${WORK_DIR}/consumer_mpi_pc)
  if(NOT last_output MATCHES "^mpi ranks: 1 sum: 2")
    message(FATAL_ERROR "pkg-config consumer of rill_mpi printed: ${last_output}")
  endif()
endif()

# Seed 004's ACL program on the installed librill_acl: with -I at the ACL
# folder and the library, nothing else.
find_program(CXX NAMES c++ g++ REQUIRED)
set(seed004 ${SOURCE_DIR}/examples/acl/seed004_capture.cpp)
file(READ ${SOURCE_DIR}/tests/seeds/expected/acl_seed004_capture.txt seed004_expected)
run(${PKG_CONFIG} --variable=acl_includedir rill)
string(STRIP "${last_output}" acl_includedir)
run(${PKG_CONFIG} --cflags rill_acl)
separate_arguments(acl_cflags UNIX_COMMAND "${last_output}")
list(GET acl_cflags 0 acl_first_cflag)
if(NOT acl_first_cflag STREQUAL "-I${acl_includedir}")
  message(FATAL_ERROR "rill_acl.pc's flags (${acl_cflags}) do not begin with -I${acl_includedir}")
endif()
if(NOT EXISTS ${acl_includedir}/acl/acl.h OR NOT EXISTS ${acl_includedir}/aclnnop/aclnn_add.h)
  message(FATAL_ERROR "the ACL headers are not in ${acl_includedir}")
endif()
run(${PKG_CONFIG} --libs rill_acl)
separate_arguments(acl_libs UNIX_COMMAND "${last_output}")
run(${CXX} ${seed004} -I${acl_includedir} ${acl_libs} -o ${WORK_DIR}/seed004_pc)
run(${WORK_DIR}/seed004_pc)
if(NOT last_output STREQUAL seed004_expected)
  message(FATAL_ERROR "seed 004's program on the installed librill_acl printed:\n${last_output}")
endif()

# find_package
if(NOT HAVE_MPI)
  set(HAVE_MPI OFF)
endif()
set(generator)
if(GENERATOR)
  set(generator -G ${GENERATOR})
  if(MAKE_PROGRAM)
    list(APPEND generator -DCMAKE_MAKE_PROGRAM=${MAKE_PROGRAM})
  endif()
endif()
run(${CMAKE_COMMAND} -S ${SOURCE_DIR}/tests/install -B ${WORK_DIR}/cmake_build ${generator}
    -DCMAKE_PREFIX_PATH=${prefix} -DCMAKE_BUILD_TYPE=Release -DRILL_CONSUMER_MPI=${HAVE_MPI}
    -DRILL_SEED004=${seed004})
run(${CMAKE_COMMAND} --build ${WORK_DIR}/cmake_build)
run(${WORK_DIR}/cmake_build/consumer)
if(NOT last_output MATCHES "^devices: [0-9]+")
  message(FATAL_ERROR "find_package consumer printed: ${last_output}")
endif()
check_no_mpi(${WORK_DIR}/cmake_build/consumer)
run(${WORK_DIR}/cmake_build/seed004)
if(NOT last_output STREQUAL seed004_expected)
  message(FATAL_ERROR "seed 004's program on rill::rill_acl printed:\n${last_output}")
endif()
if(HAVE_MPI)
  run(${WORK_DIR}/cmake_build/consumer_mpi)
  if(NOT last_output MATCHES "^mpi ranks: 1 sum: 2")
    message(FATAL_ERROR "find_package consumer of rill::rill_mpi printed: ${last_output}")
  endif()
endif()
message(STATUS "installed rill works with pkg-config and find_package")
