# muster_unity(TARGET BATCH): builds TARGET as unity batches of BATCH files when MUSTER_UNITY is
# on: for the targets whose files share heavy headers. Each file that includes LibTorch spends
# about 10 s before its first line on the 2-core VM (6 s loading the 650 MB precompiled header,
# 4 s emitting what LibTorch's headers define), so a batch of 8 builds in about the time of 2;
# each CLI file spends 5 s on CLI11, and the launcher's and daemon's on Boost, spdlog and JSON
# (those three targets: 223 s of compiling where they took 475 s). Off: one object a file,
# slower from scratch and quicker to rebuild after editing one file.
# Files in one batch share a translation unit, so names in their anonymous namespaces must
# differ (the build fails on a clash of the same signature).
option(MUSTER_UNITY "muster: build the larger targets in unity batches" ON)
function(muster_unity target batch)
  if(MUSTER_UNITY)
    set_target_properties(${target} PROPERTIES UNITY_BUILD ON UNITY_BUILD_BATCH_SIZE ${batch})
  endif()
endfunction()
