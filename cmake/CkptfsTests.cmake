# ckptfs_gtest: registers a GoogleTest executable with CTest under one tier
# label, so that `ctest -L unit` runs the fast tests alone and
# `ctest -L integration` the ones that start real processes:
#   unit         no daemons and no FUSE mounts: in-process fakes and
#                servers, temporary directories, short-lived child processes
#   integration  real ckptfs-meta / ckptfs-storage / ckptfs-fuse / etcd
#                processes, `ckptfs up`, FUSE mounts
#   soak, fuzz   long runs that skip themselves unless asked for
#
#   ckptfs_gtest(<target> <tier>
#     [TEST_PREFIX <prefix>]
#     [TIMEOUT <seconds>]
#     [ONE_PROCESS]
#     [INTEGRATION_SUITES <suite>...]
#     [PROPERTIES <name> <value>...])
#
# By default each case is its own CTest test (gtest_discover_tests), named
# <prefix><Suite>.<Case>. ONE_PROCESS registers one CTest test,
# <prefix><target>, that runs every case in a single process instead: for
# executables whose cases share what SetUpTestSuite started (a cluster, etcd
# members), which a process per case would start again for every case.
# TIMEOUT is then the whole executable's. GoogleTest names the failed cases
# at the end of the output (ctest --output-on-failure); one case alone runs
# with the executable's --gtest_filter. A run whose every case skipped itself
# counts as passed (the output says SKIPPED).
#
# INTEGRATION_SUITES: for a unit executable holding a few suites that start
# real processes, the cases of these suites (parameterized ones included)
# are labelled integration instead of <tier>.
#
# PROPERTIES go to every test as in gtest_discover_tests, except LABELS,
# which the tier sets.
set(CKPTFS_TEST_TIERS unit integration soak fuzz)

function(ckptfs_gtest target tier)
  cmake_parse_arguments(PARSE_ARGV 2 arg "ONE_PROCESS" "TEST_PREFIX;TIMEOUT"
    "INTEGRATION_SUITES;PROPERTIES")
  if(arg_UNPARSED_ARGUMENTS)
    message(FATAL_ERROR "ckptfs_gtest(${target}): unknown arguments ${arg_UNPARSED_ARGUMENTS}")
  endif()
  if(NOT tier IN_LIST CKPTFS_TEST_TIERS)
    message(FATAL_ERROR
      "ckptfs_gtest(${target}): tier '${tier}' is not one of ${CKPTFS_TEST_TIERS}")
  endif()
  if("LABELS" IN_LIST arg_PROPERTIES)
    message(FATAL_ERROR "ckptfs_gtest(${target}): the tier is the only label; drop LABELS")
  endif()
  if(arg_ONE_PROCESS AND arg_INTEGRATION_SUITES)
    message(FATAL_ERROR
      "ckptfs_gtest(${target}): ONE_PROCESS runs one test, it has one label")
  endif()
  # With INTEGRATION_SUITES the script below sets every label: CTest adds
  # LABELS to those a test already has, it never replaces them.
  set(properties)
  if(NOT arg_INTEGRATION_SUITES)
    set(properties LABELS ${tier})
  endif()
  if(DEFINED arg_TIMEOUT)
    list(APPEND properties TIMEOUT ${arg_TIMEOUT})
  endif()
  list(APPEND properties ${arg_PROPERTIES})

  if(arg_ONE_PROCESS)
    set(name "${arg_TEST_PREFIX}${target}")
    add_test(NAME ${name} COMMAND ${target})
    set_tests_properties(${name} PROPERTIES ${properties})
    return()
  endif()

  set(prefix_args)
  if(DEFINED arg_TEST_PREFIX)
    set(prefix_args TEST_PREFIX "${arg_TEST_PREFIX}")
  endif()
  gtest_discover_tests(${target} ${prefix_args}
    DISCOVERY_TIMEOUT 60
    TEST_LIST ${target}_TESTS
    PROPERTIES ${properties})

  if(arg_INTEGRATION_SUITES)
    # The discovered names exist only when CTest reads the test files: a
    # script included after the executable's own list labels them there.
    string(LENGTH "${arg_TEST_PREFIX}" prefix_length)
    list(JOIN arg_INTEGRATION_SUITES "|" suites)
    set(script "${CMAKE_CURRENT_BINARY_DIR}/${target}_tiers.cmake")
    file(WRITE "${script}"
      "foreach(test IN LISTS ${target}_TESTS)\n"
      "  string(SUBSTRING \"\${test}\" ${prefix_length} -1 name)\n"
      "  if(name MATCHES \"^([^./]+/)?(${suites})\\\\.\")\n"
      "    set_tests_properties(\"\${test}\" PROPERTIES LABELS integration)\n"
      "  else()\n"
      "    set_tests_properties(\"\${test}\" PROPERTIES LABELS ${tier})\n"
      "  endif()\n"
      "endforeach()\n")
    set_property(DIRECTORY APPEND PROPERTY TEST_INCLUDE_FILES "${script}")
  endif()
endfunction()
