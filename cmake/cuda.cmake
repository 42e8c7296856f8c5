# SPDX-License-Identifier: MIT
# The CUDA backend (src/backend/cuda): built when the CUDA toolkit's
# headers are found (cuda.h, cublas_v2.h; cudnn.h where it is), for their
# types only. cudnn.h is looked for in the toolkit, /usr/include and
# PyTorch's pip layout (site-packages/nvidia/cudnn/include); without it
# the backend is built all the same and conv2d_f32 is refused on CUDA
# devices with a sentence (RILL_HAVE_CUDNN says which).
# Nothing here links libcuda, libcudart, cuBLAS or cuDNN: the backend loads
# them at run time, so the library runs where no NVIDIA driver is installed
# (rill_device_count_of_kind says why there is no CUDA device then). The
# built-in ops' kernels (op_kernels.cu) are compiled by nvcc into a fatbin
# (PTX for any GPU and an sm_90 cubin) and embedded; without nvcc they have
# no image and the ops are refused on CUDA devices with a sentence. Sets
# RILL_CUDA_BUILT, RILL_CUDA_SOURCES and RILL_NVCC, and defines
# rill_cuda_configure and rill_ptx_source.
option(RILL_CUDA "Build the CUDA backend when the CUDA toolkit's headers are found" ON)

find_program(RILL_NVCC nvcc HINTS ENV CUDA_PATH ENV CUDA_HOME PATH_SUFFIXES bin
  PATHS /usr/local/cuda/bin)
set(rill_cuda_hints ENV CUDA_PATH ENV CUDA_HOME /usr/local/cuda)
if(RILL_NVCC)
  get_filename_component(rill_cuda_bin ${RILL_NVCC} DIRECTORY)
  get_filename_component(rill_cuda_root ${rill_cuda_bin} DIRECTORY)
  list(PREPEND rill_cuda_hints ${rill_cuda_root})
  find_program(RILL_PTXAS ptxas HINTS ${rill_cuda_bin} NO_DEFAULT_PATH)
endif()

set(RILL_CUDA_BUILT OFF)
set(RILL_CUDA_SOURCES)
if(RILL_CUDA)
  find_path(RILL_CUDA_INCLUDE_DIR cuda.h HINTS ${rill_cuda_hints} PATH_SUFFIXES include)
  find_path(RILL_CUBLAS_INCLUDE_DIR cublas_v2.h HINTS ${rill_cuda_hints} PATH_SUFFIXES include)
  # PyTorch's wheels bring cuDNN as the nvidia-cudnn package: its headers
  # sit in site-packages/nvidia/cudnn/include of the Python that has it.
  set(rill_cudnn_hints ${rill_cuda_hints})
  find_program(rill_python3 NAMES python3)
  if(rill_python3)
    execute_process(COMMAND ${rill_python3} -c
      "import nvidia.cudnn as m; print(list(m.__path__)[0])"
      OUTPUT_VARIABLE rill_pip_cudnn OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET
      RESULT_VARIABLE rill_pip_cudnn_rc)
    if(rill_pip_cudnn_rc EQUAL 0 AND rill_pip_cudnn)
      list(APPEND rill_cudnn_hints ${rill_pip_cudnn})
    endif()
  endif()
  find_path(RILL_CUDNN_INCLUDE_DIR cudnn.h HINTS ${rill_cudnn_hints} PATH_SUFFIXES include)
  if(RILL_CUDA_INCLUDE_DIR AND RILL_CUBLAS_INCLUDE_DIR)
    set(RILL_CUDA_BUILT ON)
    if(RILL_CUDNN_INCLUDE_DIR)
      message(STATUS "rill: CUDA backend on (headers in ${RILL_CUDA_INCLUDE_DIR}; cuDNN's in "
                     "${RILL_CUDNN_INCLUDE_DIR})")
    else()
      set(RILL_CUDNN_INCLUDE_DIR "")
      message(STATUS "rill: CUDA backend on (headers in ${RILL_CUDA_INCLUDE_DIR}), without "
                     "cuDNN: cudnn.h not found, so conv2d_f32 is refused on CUDA devices; "
                     "install cuDNN or set RILL_CUDNN_INCLUDE_DIR")
    endif()
  else()
    message(STATUS "rill: CUDA backend off: cuda.h and cublas_v2.h not both found; "
                   "install the CUDA toolkit, or point RILL_CUDA_INCLUDE_DIR and "
                   "RILL_CUBLAS_INCLUDE_DIR at them")
  endif()
endif()

# rill_ptx_source(<out.c> <source.cu> <function> [FATBIN] [DEPENDS files...]):
# generates out.c, which defines `const char *<function>(void)` returning
# the PTX of source.cu, or NULL when nvcc was not found. The PTX is for
# compute_75, the oldest architecture nvcc 13 targets, which the driver
# compiles for the GPU it finds; ptxas assembles it for sm_90 (the GPUs
# rill is checked on), so PTX the driver would refuse fails the build.
# With FATBIN, the function returns a fatbin instead (8-byte aligned): that
# PTX beside the sm_90 cubin, which the driver loads as it is on the GPUs
# rill is checked on, even where the driver is older than the toolkit and
# so could not compile the PTX. Its images are not compressed, so the PTX
# can be read back (tests/unit/test_cuda_ops.c does). -lineinfo lets
# compute-sanitizer name source lines.
function(rill_ptx_source out_c cu symbol)
  cmake_parse_arguments(P "FATBIN" "" "DEPENDS" ${ARGN})
  get_filename_component(base ${out_c} NAME_WE)
  get_filename_component(dir ${out_c} DIRECTORY)
  set(embed ${PROJECT_SOURCE_DIR}/cmake/embed_ptx.cmake)
  if(RILL_NVCC AND RILL_PTXAS)
    set(flags -std=c++17 -O3 -lineinfo -I${PROJECT_SOURCE_DIR}/src -I${PROJECT_SOURCE_DIR}/include)
    if(RILL_WERROR)
      list(APPEND flags -Werror all-warnings)
    endif()
    if(P_FATBIN)
      set(image ${dir}/${base}.fatbin)
      set(make ${RILL_NVCC} ${flags} -fatbin -gencode arch=compute_75,code=compute_75
        -gencode arch=compute_90,code=sm_90 -Xfatbin=-compress=false ${cu} -o ${image})
      set(check) # nvcc's ptxas made the cubin
      set(embed_image -DIMAGE=${image})
    else()
      set(image ${dir}/${base}.ptx)
      set(make ${RILL_NVCC} ${flags} -ptx -arch=compute_75 ${cu} -o ${image})
      set(check COMMAND ${RILL_PTXAS} -arch=sm_90 ${image} -o ${dir}/${base}.sm_90.cubin)
      set(embed_image -DPTX=${image})
    endif()
    add_custom_command(OUTPUT ${out_c}
      COMMAND ${CMAKE_COMMAND} -E make_directory ${dir}
      COMMAND ${make}
      ${check}
      COMMAND ${CMAKE_COMMAND} ${embed_image} -DOUT=${out_c} -DSYMBOL=${symbol} -P ${embed}
      DEPENDS ${cu} ${P_DEPENDS} ${embed}
      COMMENT "Kernels of ${cu}" VERBATIM)
  else()
    add_custom_command(OUTPUT ${out_c}
      COMMAND ${CMAKE_COMMAND} -E make_directory ${dir}
      COMMAND ${CMAKE_COMMAND} -DOUT=${out_c} -DSYMBOL=${symbol} -P ${embed}
      DEPENDS ${embed} VERBATIM)
  endif()
endfunction()

if(RILL_CUDA_BUILT)
  set(rill_op_image_c ${PROJECT_BINARY_DIR}/generated/cuda/op_image.c)
  rill_ptx_source(${rill_op_image_c} ${PROJECT_SOURCE_DIR}/src/backend/cuda/op_kernels.cu
    rill__cuda_op_image FATBIN DEPENDS ${PROJECT_SOURCE_DIR}/src/backend/op_args.h
    ${PROJECT_SOURCE_DIR}/src/backend/half_bits.h ${PROJECT_SOURCE_DIR}/src/backend/op_math.h)
  set(RILL_CUDA_SOURCES
    src/backend/cuda/cuda_driver.c
    src/backend/cuda/cuda_context.c
    src/backend/cuda/cuda_device.c
    src/backend/cuda/cuda_stream.c
    src/backend/cuda/cuda_complete.c
    src/backend/cuda/cuda_runner.c
    src/backend/cuda/cuda_trace.c
    src/backend/cuda/cuda_stage.c
    src/backend/cuda/cuda_graph.c
    src/backend/cuda/cuda_memory.c
    src/backend/cuda/cuda_ops.c
    src/backend/cuda/cuda_libs.c
    ${rill_op_image_c}
  )
  if(NOT RILL_NVCC OR NOT RILL_PTXAS)
    message(STATUS "rill: nvcc not found: the CUDA op kernels are built without an image; put the "
                   "CUDA toolkit's bin on PATH or set RILL_NVCC")
  endif()
endif()

# Adds the backend to target, a target of the library's objects; the
# toolkit's headers are SYSTEM, so that their warnings are not rill's.
function(rill_cuda_configure target)
  if(RILL_CUDA_BUILT)
    target_include_directories(${target} SYSTEM PRIVATE
      ${RILL_CUDA_INCLUDE_DIR} ${RILL_CUBLAS_INCLUDE_DIR} ${RILL_CUDNN_INCLUDE_DIR})
    target_compile_definitions(${target} PRIVATE RILL_HAVE_CUDA)
    if(RILL_CUDNN_INCLUDE_DIR)
      target_compile_definitions(${target} PRIVATE RILL_HAVE_CUDNN)
    endif()
  endif()
endfunction()
