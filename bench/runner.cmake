# ckptfs-bench's runner (included from bench/CMakeLists.txt): phases,
# rank executors (processes for --dir, threads for --native), figures,
# summary table, JSON, SVG plot, progress bar, CPU accounting, main.
# The workloads and RankIo implementations come from ckptfs_bench_workloads
# (workloads.cmake).
add_library(ckptfs_bench_runner STATIC
  ${CMAKE_CURRENT_LIST_DIR}/cpu.cc
  ${CMAKE_CURRENT_LIST_DIR}/disk.cc
  ${CMAKE_CURRENT_LIST_DIR}/figures.cc
  ${CMAKE_CURRENT_LIST_DIR}/interrupt.cc
  ${CMAKE_CURRENT_LIST_DIR}/json_writer.cc
  ${CMAKE_CURRENT_LIST_DIR}/options.cc
  ${CMAKE_CURRENT_LIST_DIR}/phase.cc
  ${CMAKE_CURRENT_LIST_DIR}/process_executor.cc
  ${CMAKE_CURRENT_LIST_DIR}/progress.cc
  ${CMAKE_CURRENT_LIST_DIR}/report_json.cc
  ${CMAKE_CURRENT_LIST_DIR}/runner.cc
  ${CMAKE_CURRENT_LIST_DIR}/summary.cc
  ${CMAKE_CURRENT_LIST_DIR}/svg_plot.cc
  ${CMAKE_CURRENT_LIST_DIR}/target.cc
  ${CMAKE_CURRENT_LIST_DIR}/thread_executor.cc)
target_compile_options(ckptfs_bench_runner PRIVATE ${CKPTFS_WARNINGS})
target_link_libraries(ckptfs_bench_runner PUBLIC
  ckptfs_bench_workloads
  ckptfs_client
  ckptfs_common
  ckptfs_tools
  absl::status
  absl::statusor
  absl::strings
  absl::str_format
  absl::synchronization
  absl::time
  Threads::Threads)

add_executable(ckptfs-bench ${CMAKE_CURRENT_LIST_DIR}/main.cc)
target_compile_options(ckptfs-bench PRIVATE ${CKPTFS_WARNINGS})
target_link_libraries(ckptfs-bench PRIVATE ckptfs_bench_runner)

# ckptfs-barrier-bench: the commit barrier at 1,024 / 4,096 ranks,
# asynchronous gRPC commits from one process.
add_executable(ckptfs-barrier-bench
  ${CMAKE_CURRENT_LIST_DIR}/barrier_bench_main.cc
  ${CMAKE_CURRENT_LIST_DIR}/barrier_storm.cc)
target_compile_options(ckptfs-barrier-bench PRIVATE ${CKPTFS_WARNINGS})
target_link_libraries(ckptfs-barrier-bench PRIVATE ckptfs_bench_runner)
