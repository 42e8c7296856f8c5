# SPDX-License-Identifier: MIT
# Installs the libraries, the headers, the `rill` command, pkg-config files
# and a CMake package config (find_package(rill) gives rill::rill;
# find_package(rill COMPONENTS mpi) adds rill::rill_mpi, and only then looks
# for MPI; find_package(rill COMPONENTS acl) adds rill::rill_acl, Ascend
# ACL's C API, whose headers are the one folder include/rill/acl).
include(CMakePackageConfigHelpers)

install(TARGETS rill rill_static EXPORT rillTargets
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(TARGETS rill_cli RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(FILES include/rill.h DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(TARGETS rill_mpi rill_mpi_static EXPORT rillMpiTargets
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(FILES include/rill_mpi.h DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(TARGETS rill_acl rill_acl_static EXPORT rillAclTargets
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR})
install(DIRECTORY compat/acl/include/ DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/rill/acl)

install(EXPORT rillTargets NAMESPACE rill:: DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/rill)
install(EXPORT rillMpiTargets NAMESPACE rill:: DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/rill)
install(EXPORT rillAclTargets NAMESPACE rill:: DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/rill)
configure_package_config_file(cmake/rillConfig.cmake.in
  ${CMAKE_CURRENT_BINARY_DIR}/rillConfig.cmake
  INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/rill)
write_basic_package_version_file(${CMAKE_CURRENT_BINARY_DIR}/rillConfigVersion.cmake
  COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/rillConfig.cmake
  ${CMAKE_CURRENT_BINARY_DIR}/rillConfigVersion.cmake
  DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/rill)

# rill.pc finds its prefix relative to itself, so the installed tree may move.
file(RELATIVE_PATH RILL_PC_TO_PREFIX "/${CMAKE_INSTALL_LIBDIR}/pkgconfig" "/")
string(REGEX REPLACE "/$" "" RILL_PC_TO_PREFIX "${RILL_PC_TO_PREFIX}")
set(RILL_PC_ONEDNN "")
if(RILL_ONEDNN)
  set(RILL_PC_ONEDNN " -ldnnl -lgomp")
endif()
configure_file(cmake/rill.pc.in ${CMAKE_CURRENT_BINARY_DIR}/rill.pc @ONLY)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/rill.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
configure_file(cmake/rill_acl.pc.in ${CMAKE_CURRENT_BINARY_DIR}/rill_acl.pc @ONLY)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/rill_acl.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)

# rill_mpi.pc carries MPI's flags, since rill_mpi.h includes mpi.h.
set(RILL_MPI_PC_CFLAGS "")
set(RILL_MPI_PC_LIBS "")
if(RILL_HAVE_MPI)
  foreach(dir ${MPI_C_INCLUDE_DIRS})
    string(APPEND RILL_MPI_PC_CFLAGS " -I${dir}")
  endforeach()
  foreach(lib ${MPI_C_LIBRARIES})
    string(APPEND RILL_MPI_PC_LIBS " ${lib}")
  endforeach()
endif()
configure_file(cmake/rill_mpi.pc.in ${CMAKE_CURRENT_BINARY_DIR}/rill_mpi.pc @ONLY)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/rill_mpi.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
