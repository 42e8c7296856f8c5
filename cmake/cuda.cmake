# SPDX-License-Identifier: MIT
# The CUDA backend (src/backend/cuda): built when the CUDA toolkit's
# headers are found. It includes cuda.h for the driver API's types only and
# links no CUDA library: the driver is loaded at run time, so the library
# runs where no NVIDIA driver is installed (rill_device_count_of_kind says
# why there is no CUDA device then).
option(RILL_CUDA "Build the CUDA backend when the CUDA toolkit's headers are found" ON)
set(RILL_CUDA_BUILT OFF)
if(RILL_CUDA)
  find_path(RILL_CUDA_INCLUDE_DIR cuda.h
    HINTS ENV CUDA_PATH ENV CUDA_HOME /usr/local/cuda
    PATH_SUFFIXES include)
  if(RILL_CUDA_INCLUDE_DIR)
    set(RILL_CUDA_BUILT ON)
    message(STATUS "rill: CUDA backend on (cuda.h in ${RILL_CUDA_INCLUDE_DIR})")
  else()
    message(STATUS "rill: CUDA backend off (no cuda.h; set CUDA_PATH to the toolkit to build it)")
  endif()
endif()

set(RILL_CUDA_SOURCES)
if(RILL_CUDA_BUILT)
  set(RILL_CUDA_SOURCES
    src/backend/cuda/cuda_driver.c
    src/backend/cuda/cuda_device.c
    src/backend/cuda/cuda_stream.c
    src/backend/cuda/cuda_memory.c
  )
endif()

# Adds the backend to target, a target of the library's objects.
function(rill_cuda_configure target)
  if(RILL_CUDA_BUILT)
    target_include_directories(${target} SYSTEM PRIVATE ${RILL_CUDA_INCLUDE_DIR})
    target_compile_definitions(${target} PRIVATE RILL_HAVE_CUDA)
  endif()
endfunction()

# nvcc, for the PTX of the kernels rill ships and of its tests' kernels.
find_program(RILL_NVCC nvcc HINTS ENV CUDA_PATH ENV CUDA_HOME /usr/local/cuda PATH_SUFFIXES bin)

# rill_ptx_source(<out.c> <source.cu> <function>): generates out.c, which
# defines `const char *<function>(void)` returning the PTX of source.cu
# (compiled for compute_75, which every supported driver compiles for its
# GPU when it loads the module), or NULL when nvcc was not found.
function(rill_ptx_source out_c cu symbol)
  get_filename_component(base ${out_c} NAME_WE)
  set(ptx ${CMAKE_CURRENT_BINARY_DIR}/${base}.ptx)
  if(RILL_NVCC)
    add_custom_command(OUTPUT ${out_c}
      COMMAND ${RILL_NVCC} -ptx -arch=compute_75 -std=c++17 -I${PROJECT_SOURCE_DIR}/src
              -I${PROJECT_SOURCE_DIR}/include -o ${ptx} ${cu}
      COMMAND ${CMAKE_COMMAND} -DPTX=${ptx} -DOUT=${out_c} -DSYMBOL=${symbol}
              -P ${PROJECT_SOURCE_DIR}/cmake/embed_ptx.cmake
      DEPENDS ${cu} ${PROJECT_SOURCE_DIR}/cmake/embed_ptx.cmake
      COMMENT "PTX of ${cu}" VERBATIM)
  else()
    add_custom_command(OUTPUT ${out_c}
      COMMAND ${CMAKE_COMMAND} -DOUT=${out_c} -DSYMBOL=${symbol}
              -P ${PROJECT_SOURCE_DIR}/cmake/embed_ptx.cmake
      DEPENDS ${PROJECT_SOURCE_DIR}/cmake/embed_ptx.cmake VERBATIM)
  endif()
endfunction()
