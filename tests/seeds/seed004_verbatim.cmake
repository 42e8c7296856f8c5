# SPDX-License-Identifier: MIT
# cmake -DFILE=<examples/acl/seed004_capture.cpp> -P seed004_verbatim.cmake
# Fails unless FILE is still, byte for byte, the program that seed 004's
# document prints (from its "#include <stdio.h>" to its closing brace, with
# the document's tabs and no final newline): its SHA-256 is the one taken
# from the document. The program must build on librill_acl unchanged, so it
# is never edited, reformatted or "fixed".
set(expected d4228959490ebd51dbd1c9a3a50c396a74b8f35ea63872275643289dfe88b58f)
file(SHA256 ${FILE} actual)
if(NOT actual STREQUAL expected)
  message(FATAL_ERROR "${FILE} is no longer seed 004's program: its SHA-256 is ${actual}, the "
                      "seed's is ${expected}; restore the seed's text")
endif()
message(STATUS "${FILE} is seed 004's program, byte for byte")
